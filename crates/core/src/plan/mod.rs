//! Pure planners: a loaded timeline and listings in, a plan out.

pub mod rollback;

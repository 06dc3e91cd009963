//! Why an Avro timeline file could not be read: the error of [`super::avro`] and its bounds
//! check, on its own so that neither imports the other for it.

/// Why an Avro timeline file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum AvroError {
    /// Not an Avro object container file, or a truncated one.
    #[error("not a readable Avro container: {0}")]
    Container(String),
    /// The file holds no record.
    #[error("the Avro container holds no record")]
    Empty,
    /// The record does not have the expected shape.
    #[error("unexpected Avro content: {0}")]
    Shape(String),
}

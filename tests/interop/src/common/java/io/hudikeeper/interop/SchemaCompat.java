package io.hudikeeper.interop;

import org.apache.avro.Schema;
import org.apache.hudi.common.util.Option;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.Type;

/**
 * Hudi 1.2 replaced Avro's {@link Schema} with its own {@code org.apache.hudi.common.schema.HoodieSchema}
 * in many APIs (log readers, scanners, file readers, {@code TableSchemaResolver}); 0.15, 1.0 and 1.1 take
 * and return Avro schemas. The harness keeps Avro schemas and calls those APIs through here: an Avro
 * schema argument becomes a {@code HoodieSchema} where the called method's parameter (or the type
 * argument of an {@code Option} parameter) is one, and a returned {@code HoodieSchema} is turned back
 * into Avro by {@link #avro}.
 */
final class SchemaCompat {
  private static final String HOODIE_SCHEMA_CLASS = "org.apache.hudi.common.schema.HoodieSchema";
  private static final Class<?> HOODIE_SCHEMA = load();

  private SchemaCompat() {
  }

  private static Class<?> load() {
    try {
      return Class.forName(HOODIE_SCHEMA_CLASS);
    } catch (ClassNotFoundException e) {
      return null;
    }
  }

  /** The Avro schema of an Avro {@code Schema} or of a Hudi 1.2 {@code HoodieSchema}. */
  static Schema avro(Object schema) {
    if (schema == null || schema instanceof Schema) {
      return (Schema) schema;
    }
    if (HOODIE_SCHEMA != null && HOODIE_SCHEMA.isInstance(schema)) {
      try {
        return (Schema) HOODIE_SCHEMA.getMethod("getAvroSchema").invoke(schema);
      } catch (ReflectiveOperationException e) {
        throw new IllegalStateException("HoodieSchema.getAvroSchema() failed", e);
      }
    }
    throw new IllegalArgumentException("not a schema: " + schema.getClass().getName());
  }

  private static Object hoodie(Schema s) {
    try {
      return HOODIE_SCHEMA.getMethod("fromAvroSchema", Schema.class).invoke(null, s);
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("HoodieSchema.fromAvroSchema failed", e);
    }
  }

  /** The table's schema (as writers committed it) in Avro: getTableAvroSchema() or 1.2's getTableSchema(). */
  static Schema tableAvroSchema(org.apache.hudi.common.table.TableSchemaResolver resolver) throws Exception {
    try {
      return avro(call(resolver, "getTableAvroSchema"));
    } catch (NoSuchMethodException e) {
      return avro(call(resolver, "getTableSchema"));
    }
  }

  /** Invokes the public instance method {@code name} of {@code target} (see the class comment). */
  static Object call(Object target, String name, Object... args) throws Exception {
    return invoke(target.getClass(), target, name, args);
  }

  /** Invokes the public static method {@code name} of {@code cls} (see the class comment). */
  static Object callStatic(Class<?> cls, String name, Object... args) throws Exception {
    return invoke(cls, null, name, args);
  }

  private static Object invoke(Class<?> cls, Object target, String name, Object[] args) throws Exception {
    for (Method m : candidates(cls)) {
      if (!m.getName().equals(name) || m.getParameterCount() != args.length
          || Modifier.isStatic(m.getModifiers()) != (target == null)) {
        continue;
      }
      Object[] adapted = adapt(m, args);
      if (adapted == null) {
        continue;
      }
      m.setAccessible(true);
      try {
        return m.invoke(target, adapted);
      } catch (InvocationTargetException e) {
        Throwable c = e.getCause();
        if (c instanceof Exception) {
          throw (Exception) c;
        }
        throw e;
      }
    }
    throw new NoSuchMethodException(cls.getName() + "." + name + " taking " + args.length + " matching arguments");
  }

  private static Method[] candidates(Class<?> cls) {
    Method[] pub = cls.getMethods();
    Method[] decl = cls.getDeclaredMethods();
    Method[] all = new Method[pub.length + decl.length];
    System.arraycopy(pub, 0, all, 0, pub.length);
    System.arraycopy(decl, 0, all, pub.length, decl.length);
    return all;
  }

  /** The arguments converted for m's parameters, or null when they do not fit. */
  private static Object[] adapt(Method m, Object[] args) {
    Class<?>[] types = m.getParameterTypes();
    Type[] generic = m.getGenericParameterTypes();
    Object[] out = new Object[args.length];
    for (int i = 0; i < args.length; i++) {
      Object a = args[i];
      Class<?> t = types[i];
      if (a instanceof Schema && HOODIE_SCHEMA != null && t == HOODIE_SCHEMA) {
        a = hoodie((Schema) a);
      } else if (a instanceof Option && t == Option.class && HOODIE_SCHEMA != null
          && generic[i] instanceof ParameterizedType
          && ((ParameterizedType) generic[i]).getActualTypeArguments()[0] == HOODIE_SCHEMA
          && ((Option<?>) a).isPresent() && ((Option<?>) a).get() instanceof Schema) {
        a = Option.of(hoodie((Schema) ((Option<?>) a).get()));
      }
      if (a == null ? t.isPrimitive() : !box(t).isInstance(a)) {
        return null;
      }
      out[i] = a;
    }
    return out;
  }

  private static Class<?> box(Class<?> t) {
    if (!t.isPrimitive()) {
      return t;
    }
    if (t == int.class) {
      return Integer.class;
    }
    if (t == long.class) {
      return Long.class;
    }
    if (t == boolean.class) {
      return Boolean.class;
    }
    return t;
  }
}

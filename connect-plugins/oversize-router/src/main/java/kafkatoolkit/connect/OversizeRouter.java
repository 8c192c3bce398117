package kafkatoolkit.connect;

import java.nio.ByteBuffer;
import java.util.Collection;
import java.util.HashMap;
import java.util.Map;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.connect.connector.ConnectRecord;
import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.storage.Converter;
import org.apache.kafka.connect.transforms.Transformation;

/**
 * Sets aside a change record too large for its topic, so the connector keeps running.
 *
 * <p>A source task whose producer refuses a record (RecordTooLargeException) fails, and with it the
 * capture of every table. Connect's errors.tolerance=all would skip such a record, but it also skips
 * records that fail in a converter or a transform, silently. This transform, placed last in the
 * chain, measures each record as the connector's converters will write it; one over {@code max.bytes}
 * is replaced by a small marker on {@code topic}: which topic and key it was, its size, the limit and
 * the Debezium {@code source} block (LSN, table, commit time). Everything else passes unchanged.
 *
 * <p>Cost: a record whose worst-case size (every character JSON-escaped, bytes base64'd, 512 bytes
 * per schema field) fits the limit is passed after one walk over its values; only a record that may
 * not fit is serialized once more here to get its exact size.
 */
public class OversizeRouter<R extends ConnectRecord<R>> implements Transformation<R> {

    public static final String MAX_BYTES = "max.bytes";
    public static final String TOPIC = "topic";
    private static final String KEY_CONVERTER = "key.converter";
    private static final String VALUE_CONVERTER = "value.converter";
    private static final String JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter";
    // The producer's own framing of one record (batch header, varints): far below this.
    private static final long RECORD_OVERHEAD = 1024;
    private static final long PER_SCHEMA_FIELD = 512;

    public static final ConfigDef CONFIG_DEF = new ConfigDef()
            .define(MAX_BYTES, ConfigDef.Type.LONG, ConfigDef.NO_DEFAULT_VALUE, ConfigDef.Range.atLeast(1024),
                    ConfigDef.Importance.HIGH, "the largest record the producer and the topic accept (bytes)")
            .define(TOPIC, ConfigDef.Type.STRING, ConfigDef.NO_DEFAULT_VALUE, new ConfigDef.NonEmptyString(),
                    ConfigDef.Importance.HIGH, "where the marker of a record set aside goes")
            .define(KEY_CONVERTER, ConfigDef.Type.STRING, JSON_CONVERTER, ConfigDef.Importance.MEDIUM,
                    "the connector's key converter (key.converter.* settings are passed to it)")
            .define(VALUE_CONVERTER, ConfigDef.Type.STRING, JSON_CONVERTER, ConfigDef.Importance.MEDIUM,
                    "the connector's value converter (value.converter.* settings are passed to it)");

    static final Schema MARKER_KEY = SchemaBuilder.struct().name("kafkatoolkit.connect.OversizeKey")
            .field("source_topic", Schema.STRING_SCHEMA)
            .field("key", Schema.OPTIONAL_STRING_SCHEMA)
            .build();

    private long maxBytes;
    private String topic;
    private Converter keyConverter;
    private Converter valueConverter;

    @Override
    public void configure(Map<String, ?> props) {
        Map<String, Object> parsed = CONFIG_DEF.parse(props);
        maxBytes = (Long) parsed.get(MAX_BYTES);
        topic = (String) parsed.get(TOPIC);
        keyConverter = converter((String) parsed.get(KEY_CONVERTER), props, KEY_CONVERTER + ".", true);
        valueConverter = converter((String) parsed.get(VALUE_CONVERTER), props, VALUE_CONVERTER + ".", false);
    }

    private Converter converter(String className, Map<String, ?> props, String prefix, boolean isKey) {
        Map<String, Object> settings = new HashMap<>();
        props.forEach((k, v) -> {
            if (k.startsWith(prefix)) {
                settings.put(k.substring(prefix.length()), v);
            }
        });
        try {
            Class<?> type = Class.forName(className, true, OversizeRouter.class.getClassLoader());
            Converter c = (Converter) type.getDeclaredConstructor().newInstance();
            withLoaderOf(c, () -> {
                c.configure(settings, isKey);
                return null;
            });
            return c;
        } catch (ReflectiveOperationException | ClassCastException e) {
            throw new ConfigException(prefix.substring(0, prefix.length() - 1), className,
                    "cannot load this converter for measuring records: " + e);
        }
    }

    @Override
    public R apply(R record) {
        if (record.value() == null) {
            return record;
        }
        long bound = RECORD_OVERHEAD + headersBound(record)
                + bound(record.keySchema(), record.key()) + bound(record.valueSchema(), record.value());
        if (bound <= maxBytes) {
            return record;
        }
        long size = exactSize(record);
        return size <= maxBytes ? record : marker(record, size);
    }

    /**
     * Runs {@code action} with the converter's own class loader as the thread's context loader, as Connect
     * does for the connector's converters. A converter from another plugin folder (Apicurio's AvroConverter)
     * resolves its configured classes through the context loader, which is otherwise this plugin's.
     */
    private static <T> T withLoaderOf(Converter converter, java.util.function.Supplier<T> action) {
        Thread thread = Thread.currentThread();
        ClassLoader previous = thread.getContextClassLoader();
        thread.setContextClassLoader(converter.getClass().getClassLoader());
        try {
            return action.get();
        } finally {
            thread.setContextClassLoader(previous);
        }
    }

    private long exactSize(R record) {
        byte[] key = withLoaderOf(keyConverter,
                () -> keyConverter.fromConnectData(record.topic(), record.keySchema(), record.key()));
        byte[] value = withLoaderOf(valueConverter,
                () -> valueConverter.fromConnectData(record.topic(), record.valueSchema(), record.value()));
        return RECORD_OVERHEAD + headersBound(record) + (key == null ? 0 : key.length)
                + (value == null ? 0 : value.length);
    }

    private R marker(R record, long size) {
        Schema sourceSchema = sourceSchema(record.valueSchema());
        SchemaBuilder builder = SchemaBuilder.struct().name("kafkatoolkit.connect.OversizeRecord")
                .field("source_topic", Schema.STRING_SCHEMA)
                .field("size_bytes", Schema.INT64_SCHEMA)
                .field("max_bytes", Schema.INT64_SCHEMA)
                .field("op", Schema.OPTIONAL_STRING_SCHEMA);
        if (sourceSchema != null) {
            builder.field("source", sourceSchema);
        }
        Schema schema = builder.build();
        Struct value = new Struct(schema)
                .put("source_topic", record.topic())
                .put("size_bytes", size)
                .put("max_bytes", maxBytes)
                .put("op", envelopeString(record.value(), "op"));
        if (sourceSchema != null) {
            value.put("source", ((Struct) record.value()).get("source"));
        }
        Struct key = new Struct(MARKER_KEY)
                .put("source_topic", record.topic())
                .put("key", record.key() == null ? null : record.key().toString());
        return record.newRecord(topic, null, MARKER_KEY, key, schema, value, record.timestamp());
    }

    private static Schema sourceSchema(Schema valueSchema) {
        if (valueSchema == null || valueSchema.type() != Schema.Type.STRUCT) {
            return null;
        }
        Field source = valueSchema.field("source");
        return source == null ? null : source.schema();
    }

    private static String envelopeString(Object value, String field) {
        if (value instanceof Struct struct && struct.schema().field(field) != null) {
            Object found = struct.get(field);
            return found == null ? null : found.toString();
        }
        return null;
    }

    private static long headersBound(ConnectRecord<?> record) {
        long total = 0;
        for (Header header : record.headers()) {
            total += 64 + header.key().length() + bound(header.schema(), header.value());
        }
        return total;
    }

    /** An upper bound of the bytes a JSON or Avro converter writes for this value and its schema. */
    static long bound(Schema schema, Object value) {
        return schemaBound(schema) + valueBound(value);
    }

    private static long schemaBound(Schema schema) {
        if (schema == null) {
            return 0;
        }
        long total = PER_SCHEMA_FIELD;
        switch (schema.type()) {
            case STRUCT -> {
                for (Field f : schema.fields()) {
                    total += schemaBound(f.schema());
                }
            }
            case ARRAY -> total += schemaBound(schema.valueSchema());
            case MAP -> total += schemaBound(schema.keySchema()) + schemaBound(schema.valueSchema());
            default -> { }
        }
        return total;
    }

    private static long valueBound(Object value) {
        if (value == null) {
            return 8;
        }
        if (value instanceof CharSequence text) {
            return 6L * text.length() + 2;  // a six-character JSON escape for every character at worst
        }
        if (value instanceof byte[] bytes) {
            return 4L * ((bytes.length + 2) / 3) + 2;
        }
        if (value instanceof ByteBuffer buffer) {
            return 4L * ((buffer.remaining() + 2) / 3) + 2;
        }
        if (value instanceof Struct struct) {
            long total = 2;
            for (Field f : struct.schema().fields()) {
                total += f.name().length() * 6L + 4 + valueBound(struct.get(f));
            }
            return total;
        }
        if (value instanceof Collection<?> items) {
            long total = 2;
            for (Object item : items) {
                total += 1 + valueBound(item);
            }
            return total;
        }
        if (value instanceof Map<?, ?> map) {
            long total = 2;
            for (Map.Entry<?, ?> e : map.entrySet()) {
                total += 2 + valueBound(e.getKey()) + valueBound(e.getValue());
            }
            return total;
        }
        return 32 + 6L * value.toString().length();  // numbers, booleans, dates, decimals
    }

    @Override
    public ConfigDef config() {
        return CONFIG_DEF;
    }

    @Override
    public void close() {
        closeQuietly(keyConverter);
        closeQuietly(valueConverter);
    }

    private static void closeQuietly(Converter converter) {
        if (converter == null) {
            return;
        }
        try {
            converter.close();
        } catch (Exception ignored) {
            // closing a converter that only measured records frees nothing we depend on
        }
    }
}

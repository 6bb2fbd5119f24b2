import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;

// The order in which Java's HashMap yields keys put in a given order (tests/cli/test_java_order.py).
// stdin: one key a line, "s TEXT" (a String) or "tp TOPIC PARTITION" (a key hashed as Kafka's
// TopicPartition: 31 * (31 + partition) + topic.hashCode()); a blank line ends a map.
// stdout: each map's keys as the map iterates them, one line per map, tab-separated.
public class JavaHashMapOrder {
    static final class TopicPartition {
        final String topic;
        final int partition;

        TopicPartition(String topic, int partition) {
            this.topic = topic;
            this.partition = partition;
        }

        @Override
        public int hashCode() {
            return 31 * (31 + partition) + Objects.hashCode(topic);
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof TopicPartition && ((TopicPartition) o).partition == partition
                && ((TopicPartition) o).topic.equals(topic);
        }

        @Override
        public String toString() {
            return topic + ":" + partition;
        }
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        Map<Object, Integer> map = new HashMap<>();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                System.out.println(String.join("\t", map.keySet().stream().map(Object::toString).toArray(String[]::new)));
                map = new HashMap<>();
            } else if (line.startsWith("s ")) {
                map.put(line.substring(2), 0);
            } else {
                String[] parts = line.split(" ");
                map.put(new TopicPartition(parts[1], Integer.parseInt(parts[2])), 0);
            }
        }
    }
}

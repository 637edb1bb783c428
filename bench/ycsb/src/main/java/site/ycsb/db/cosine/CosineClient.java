package site.ycsb.db.cosine;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.Properties;
import java.util.Set;
import java.util.Vector;
import java.util.function.Supplier;

import redis.clients.jedis.ClientSetInfoConfig;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisCluster;
import redis.clients.jedis.commands.JedisBinaryCommands;
import redis.clients.jedis.commands.ProtocolCommand;
import redis.clients.jedis.util.JedisClusterCRC16;
import site.ycsb.ByteArrayByteIterator;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;

/**
 * YCSB binding for Cosine: a record is one value (its fields, length-prefixed) under the record's key.
 *
 * <p>Properties:
 * <ul>
 *   <li>{@code cosine.host} (host:port, default 127.0.0.1:6379): where point operations go, i.e. twemproxy
 *       in front of a deployed cluster, or one cosine-server, or redis-server;</li>
 *   <li>{@code cosine.shards} (host:port,host:port...; default {@code cosine.host}): where scans go. twemproxy
 *       cannot route a range, so a scan asks every shard for its first {@code count} keys {@code >= start}
 *       ({@code RANGE start count}) and merges them (scatter-gather);</li>
 *   <li>{@code cosine.scan} ({@code range} or {@code zset}, default {@code range}): {@code zset} keeps a sorted-set
 *       index of the keys as YCSB's own Redis binding does (ZADD on insert, ZRANGEBYLEX on scan), for servers
 *       without RANGE (redis-server);</li>
 *   <li>{@code cosine.timeout.ms} (default 2000);</li>
 *   <li>{@code cosine.cluster} ({@code true} or {@code false}, default {@code false}): the servers speak the Redis
 *       Cluster protocol (a deployment with replicas: each shard a Raft group). Point operations then go through
 *       JedisCluster, which learns the slots with {@code CLUSTER SLOTS} from the seeds in {@code cosine.host}
 *       (host:port,host:port...) and follows {@code -MOVED} to each shard's leader; a scan sends {@code RANGE} to every
 *       shard's leader (routed by a key of one of the shard's slots) and merges. {@code cosine.cluster.attempts}
 *       (default 10) and {@code cosine.cluster.retry.ms} (default 10000): JedisCluster's retries of a request whose
 *       node failed or redirected it (a leader killed: until a new one is elected).</li>
 * </ul>
 *
 * <p>{@code update} of some fields is a read-modify-write of the record (GET, merge, SET): not atomic against a
 * concurrent update of the same record (YCSB's Redis binding uses HMSET, which is).
 */
public class CosineClient extends DB {
  private static final String INDEX = "_ycsb_index";
  private static final ProtocolCommand RANGE = () -> "RANGE".getBytes(StandardCharsets.US_ASCII);

  private Jedis point;
  private final List<Jedis> shards = new ArrayList<>();
  private boolean zsetIndex;
  /** Cluster mode: the cluster, and one key per shard (its first slot's) that routes RANGE there. */
  private JedisCluster cluster;
  private final List<byte[]> shardKeys = new ArrayList<>();

  private static HostAndPort hostPort(String hostPort) throws DBException {
    String[] hp = hostPort.trim().split(":");
    if (hp.length != 2) {
      throw new DBException("expected host:port, got " + hostPort);
    }
    return new HostAndPort(hp[0], Integer.parseInt(hp[1]));
  }

  private static DefaultJedisClientConfig config(int timeoutMs) {
    return DefaultJedisClientConfig.builder()
        .timeoutMillis(timeoutMs)
        // twemproxy closes a connection on a command it does not know (CLIENT SETINFO)
        .clientSetInfoConfig(ClientSetInfoConfig.DISABLED)
        .build();
  }

  /** Where point operations go: the cluster, or the one server/proxy. */
  private JedisBinaryCommands ops() {
    return cluster != null ? cluster : point;
  }

  private static Jedis connect(String hostPort, int timeoutMs) throws DBException {
    return new Jedis(hostPort(hostPort), config(timeoutMs));
  }

  /** Cluster mode: JedisCluster over the seeds, and a routing key for each shard's slot ranges. */
  private void initCluster(String seeds, int timeout, Properties p) throws DBException {
    Set<HostAndPort> nodes = new LinkedHashSet<>();
    for (String s : seeds.split(",")) {
      nodes.add(hostPort(s));
    }
    int attempts = Integer.parseInt(p.getProperty("cosine.cluster.attempts", "10"));
    Duration retry = Duration.ofMillis(Long.parseLong(p.getProperty("cosine.cluster.retry.ms", "10000")));
    cluster = new JedisCluster(nodes, config(timeout), attempts, retry);
    List<Object> ranges = null;
    for (HostAndPort n : nodes) {
      try (Jedis j = new Jedis(n, config(timeout))) {
        ranges = j.clusterSlots();
        break;
      } catch (RuntimeException e) {
        // try the next seed
      }
    }
    if (ranges == null) {
      throw new DBException("no seed of " + seeds + " answers CLUSTER SLOTS");
    }
    for (Object r : ranges) {
      List<?> range = (List<?>) r;
      long lo = (Long) range.get(0);
      long hi = (Long) range.get(1);
      for (int tag = 0; ; tag++) {
        byte[] k = ("{" + tag + "}").getBytes(StandardCharsets.US_ASCII);
        int slot = JedisClusterCRC16.getSlot(k);
        if (slot >= lo && slot <= hi) {
          shardKeys.add(k);
          break;
        }
      }
    }
  }

  @Override
  public void init() throws DBException {
    Properties p = getProperties();
    int timeout = Integer.parseInt(p.getProperty("cosine.timeout.ms", "2000"));
    String host = p.getProperty("cosine.host", "127.0.0.1:6379");
    String scan = p.getProperty("cosine.scan", "range");
    if (!scan.equals("range") && !scan.equals("zset")) {
      throw new DBException("cosine.scan must be range or zset, got " + scan);
    }
    zsetIndex = scan.equals("zset");
    if (Boolean.parseBoolean(p.getProperty("cosine.cluster", "false"))) {
      if (zsetIndex) {
        throw new DBException("cosine.scan=zset needs one server (its index is one key); use range with cosine.cluster");
      }
      initCluster(host, timeout, p);
      return;
    }
    point = connect(host, timeout);
    for (String s : p.getProperty("cosine.shards", host).split(",")) {
      shards.add(connect(s, timeout));
    }
  }

  @Override
  public void cleanup() throws DBException {
    if (cluster != null) {
      cluster.close();
      return;
    }
    point.close();
    for (Jedis j : shards) {
      j.close();
    }
  }

  /** Fields as {@code [u16 name length][name][u32 value length][value]...}. */
  static byte[] encode(Map<String, byte[]> fields) {
    int n = 0;
    for (Map.Entry<String, byte[]> e : fields.entrySet()) {
      n += 6 + e.getKey().getBytes(StandardCharsets.UTF_8).length + e.getValue().length;
    }
    ByteBuffer b = ByteBuffer.allocate(n);
    for (Map.Entry<String, byte[]> e : fields.entrySet()) {
      byte[] k = e.getKey().getBytes(StandardCharsets.UTF_8);
      b.putShort((short) k.length).put(k).putInt(e.getValue().length).put(e.getValue());
    }
    return b.array();
  }

  static Map<String, byte[]> decode(byte[] raw) {
    Map<String, byte[]> out = new HashMap<>();
    ByteBuffer b = ByteBuffer.wrap(raw);
    while (b.remaining() > 0) {
      byte[] k = new byte[b.getShort() & 0xffff];
      b.get(k);
      byte[] v = new byte[b.getInt()];
      b.get(v);
      out.put(new String(k, StandardCharsets.UTF_8), v);
    }
    return out;
  }

  private static Map<String, byte[]> bytesOf(Map<String, ByteIterator> values) {
    Map<String, byte[]> out = new HashMap<>();
    for (Map.Entry<String, ByteIterator> e : values.entrySet()) {
      out.put(e.getKey(), e.getValue().toArray());
    }
    return out;
  }

  private static void fill(byte[] raw, Set<String> fields, Map<String, ByteIterator> result) {
    for (Map.Entry<String, byte[]> e : decode(raw).entrySet()) {
      if (fields == null || fields.contains(e.getKey())) {
        result.put(e.getKey(), new ByteArrayByteIterator(e.getValue()));
      }
    }
  }

  /** Runs one operation; a client or server error (refused connection, error reply, timeout) is ERROR. */
  private static Status guarded(Supplier<Status> op) {
    try {
      return op.get();
    } catch (RuntimeException e) {
      return Status.ERROR;
    }
  }

  private static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  @Override
  public Status read(String table, String key, Set<String> fields, Map<String, ByteIterator> result) {
    return guarded(() -> {
      byte[] raw = ops().get(utf8(key));
      if (raw == null) {
        return Status.NOT_FOUND;
      }
      fill(raw, fields, result);
      return Status.OK;
    });
  }

  @Override
  public Status insert(String table, String key, Map<String, ByteIterator> values) {
    return guarded(() -> {
      ops().set(utf8(key), encode(bytesOf(values)));
      if (zsetIndex) {
        point.zadd(INDEX, 0.0, key);
      }
      return Status.OK;
    });
  }

  @Override
  public Status update(String table, String key, Map<String, ByteIterator> values) {
    return guarded(() -> {
      byte[] k = utf8(key);
      byte[] raw = ops().get(k);
      Map<String, byte[]> rec = raw == null ? new HashMap<>() : decode(raw);
      rec.putAll(bytesOf(values));
      ops().set(k, encode(rec));
      return Status.OK;
    });
  }

  @Override
  public Status delete(String table, String key) {
    return guarded(() -> {
      ops().del(utf8(key));
      if (zsetIndex) {
        point.zrem(INDEX, key);
      }
      return Status.OK;
    });
  }

  @Override
  public Status scan(String table, String startkey, int recordcount, Set<String> fields,
                     Vector<HashMap<String, ByteIterator>> result) {
    return guarded(() -> {
      List<byte[][]> rows = zsetIndex ? scanIndex(startkey, recordcount) : scanShards(startkey, recordcount);
      for (byte[][] kv : rows) {
        HashMap<String, ByteIterator> rec = new HashMap<>();
        fill(kv[1], fields, rec);
        result.add(rec);
      }
      return Status.OK;
    });
  }

  /** Scatter-gather: RANGE on every shard, merged in key order, the first {@code count} kept. */
  @SuppressWarnings("unchecked")
  private List<byte[][]> scanShards(String start, int count) {
    PriorityQueue<byte[][]> heap = new PriorityQueue<>((a, b) -> Arrays.compareUnsigned(a[0], b[0]));
    List<List<byte[]>> answers = new ArrayList<>();
    byte[] from = utf8(start);
    byte[] n = utf8(Integer.toString(count));
    if (cluster != null) {
      for (byte[] k : shardKeys) {
        answers.add((List<byte[]>) cluster.sendCommand(k, RANGE, from, n));
      }
    } else {
      for (Jedis s : shards) {
        answers.add((List<byte[]>) s.sendCommand(RANGE, from, n));
      }
    }
    for (List<byte[]> flat : answers) {
      for (int i = 0; i + 1 < flat.size(); i += 2) {
        heap.add(new byte[][] {flat.get(i), flat.get(i + 1)});
      }
    }
    List<byte[][]> out = new ArrayList<>(count);
    while (!heap.isEmpty() && out.size() < count) {
      out.add(heap.poll());
    }
    return out;
  }

  /** The sorted-set index (for redis-server): keys from ZRANGEBYLEX, then their records. */
  private List<byte[][]> scanIndex(String start, int count) {
    List<String> keys = point.zrangeByLex(INDEX, "[" + start, "+", 0, count);
    List<byte[][]> out = new ArrayList<>(keys.size());
    if (keys.isEmpty()) {
      return out;
    }
    byte[][] ks = new byte[keys.size()][];
    for (int i = 0; i < ks.length; i++) {
      ks[i] = utf8(keys.get(i));
    }
    List<byte[]> vals = point.mget(ks);
    for (int i = 0; i < ks.length; i++) {
      if (vals.get(i) != null) {
        out.add(new byte[][] {ks[i], vals.get(i)});
      }
    }
    return out;
  }
}

//! Device mode: with `[device] kind = "volume"` every counted block pays the
//! volume, so a run that reads N blocks at R IOPS takes at least N / R seconds
//! (less the bucket's burst), and the device's counters equal the block counters;
//! writes (flushes, the WAL's pages) pay the same bucket and are counted apart from reads.

use cosine_config::presets::{tiny, Preset};
use cosine_config::{Config, DeviceKind};
use cosine_engine::Engine;
use cosine_tests::{key, one_hot_level, TempDir};
use std::time::Instant;

fn volume(iops: f64, latency_us: f64) -> Config {
    let mut c = one_hot_level(10.0);
    c.device.kind = DeviceKind::Volume;
    c.device.iops = iops;
    c.device.throughput_mib_s = 1000.0;
    c.device.read_latency_us = latency_us;
    c.device.burst_ios = 1.0;
    c
}

#[test]
fn reads_pay_the_volumes_iops_and_latency() {
    let dir = TempDir::new("device-iops");
    let e = Engine::open(dir.path(), &volume(2000.0, 0.0)).expect("open");
    e.set_device_throttling(false);
    for i in 0..1000 {
        e.put(&key(i), b"value").expect("put");
    }
    e.wait_idle().expect("idle");
    e.set_device_throttling(true);
    let before = e.device().expect("a volume");
    let t = Instant::now();
    let mut blocks = 0;
    for i in 0..200 {
        blocks += e.get_counted(&key(i * 5)).expect("get").1.blocks_read();
    }
    let secs = t.elapsed().as_secs_f64();
    let paid = e.device().expect("a volume");
    assert_eq!(blocks, 200, "one block per found key");
    assert_eq!(paid.ios - before.ios, blocks, "the device is paid exactly the counted blocks");
    // 200 blocks at 2000 IOPS: 0.1 s, less one I/O of burst and the last sleep's
    // shortening (the sleep is shortened by the OS's mean overshoot; the bucket's
    // virtual time makes up for it on the next request, not after the last one)
    assert!(secs >= 0.09, "{secs} s for {blocks} blocks at 2000 IOPS");

    // A read latency of 2 ms at a rate that never binds: each read waits it.
    let dir = TempDir::new("device-latency");
    let e = Engine::open(dir.path(), &volume(1e6, 2000.0)).expect("open");
    e.set_device_throttling(false);
    for i in 0..1000 {
        e.put(&key(i), b"value").expect("put");
    }
    e.wait_idle().expect("idle");
    e.set_device_throttling(true);
    let t = Instant::now();
    for i in 0..20 {
        assert_eq!(e.get_counted(&key(i * 7)).expect("get").1.blocks_read(), 1);
    }
    let secs = t.elapsed().as_secs_f64();
    // on average 2 ms per read (the sleep adapts to the OS's overshoot): 20 reads, with slack
    assert!((0.02..0.4).contains(&secs), "{secs} s for 20 reads of 2 ms");
}

#[test]
fn a_local_device_counts_but_does_not_throttle() {
    let dir = TempDir::new("device-local");
    let e = Engine::open(dir.path(), &tiny(Preset::RocksDb)).expect("open");
    assert!(e.device().is_none());
    assert_eq!(Config::default().device.kind, DeviceKind::Local);
}

#[test]
fn writes_pay_the_volume_apart_from_reads() {
    let dir = TempDir::new("device-writes");
    let e = Engine::open(dir.path(), &volume(1e6, 0.0)).expect("open");
    let before = e.device().expect("a volume");
    let wal0 = e.stats().wal_bytes;
    for i in 0..1000 {
        e.put(&key(i), b"value").expect("put");
    }
    e.wait_idle().expect("idle");
    let paid = e.device().expect("a volume");
    let wal_pages = (e.stats().wal_bytes - wal0) / cosine_wal::PAGE_BYTES;
    let writes = (paid.ios - paid.read_ios) - (before.ios - before.read_ios);
    assert!(wal_pages > 0, "1000 puts fill at least one 4 KiB log page");
    assert!(writes > wal_pages, "{writes} write I/Os: the log's {wal_pages} pages and the flushes' blocks");
    assert_eq!(paid.foreground_read_ios - before.foreground_read_ios, 0, "no operation read a block");
}

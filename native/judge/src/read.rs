//! The audit's Kafka reader, columnar (src/onceflow/kafka/native_read.py drives it): librdkafka's
//! consumer (the one confluent-kafka's wheel carries, its functions handed over by Python) polled
//! here, each record's key, value, partition and offset appended to Arrow buffers, with no Python
//! object made per record. Python keeps the consumer's life (configure, assign, positions, close).

use std::os::raw::c_void;

/// librdkafka's rd_kafka_message_t (rdkafka.h; its layout is part of librdkafka's stable ABI).
#[repr(C)]
pub struct RdMessage {
    err: i32,
    rkt: *mut c_void,
    partition: i32,
    payload: *const u8,
    len: usize,
    key: *const u8,
    key_len: usize,
    offset: i64,
    _private: *mut c_void,
}

type PollFn = unsafe extern "C" fn(*mut c_void, i32) -> *mut RdMessage;
type DestroyFn = unsafe extern "C" fn(*mut RdMessage);

/// A binary column in Arrow's large layout: a validity byte a row (packed on the way out), i64
/// offsets, the bytes.
#[derive(Default)]
struct Binary {
    valid: Vec<u8>,
    offsets: Vec<i64>,
    data: Vec<u8>,
}

impl Binary {
    fn push(&mut self, ptr: *const u8, len: usize) {
        if self.offsets.is_empty() {
            self.offsets.push(0);
        }
        if ptr.is_null() {
            self.valid.push(0);
        } else {
            self.valid.push(1);
            // SAFETY: librdkafka's payload/key pointer is valid for `len` bytes until the message is destroyed
            self.data.extend_from_slice(unsafe { std::slice::from_raw_parts(ptr, len) });
        }
        self.offsets.push(self.data.len() as i64);
    }
}

#[derive(Default)]
pub struct Reader {
    keys: Binary,
    values: Binary,
    partitions: Vec<i32>,
    offsets: Vec<i64>,
}

#[no_mangle]
pub extern "C" fn onceflow_reader_new() -> *mut Reader {
    Box::into_raw(Box::default())
}

/// # Safety
/// `r` came from onceflow_reader_new and is not used after.
#[no_mangle]
pub unsafe extern "C" fn onceflow_reader_free(r: *mut Reader) {
    if !r.is_null() {
        drop(Box::from_raw(r));
    }
}

/// Poll the consumer `rk` and hold its records until `max_records` are held, every partition is
/// done, or a poll waits `timeout_ms` for nothing (then `*timed_out` is 1: the caller asks the
/// consumer's positions, since at read_committed a range's last offsets may be transaction
/// markers or aborted records, which no record shows). The ranges: `parts[i]` read up to
/// `ends[i]` (exclusive); `done[i]` is set once a record at or past the end's last offset is seen.
/// Error events are skipped, as the Python path skips them. Returns the number of records held.
///
/// # Safety
/// `poll`/`destroy` are librdkafka's rd_kafka_consumer_poll/rd_kafka_message_destroy, `rk` a
/// consumer of it; `parts`, `ends`, `done` hold `n` entries.
#[no_mangle]
pub unsafe extern "C" fn onceflow_reader_fill(
    r: *mut Reader,
    poll: PollFn,
    destroy: DestroyFn,
    rk: *mut c_void,
    timeout_ms: i32,
    max_records: usize,
    n: usize,
    parts: *const i32,
    ends: *const i64,
    done: *mut u8,
    timed_out: *mut i32,
) -> i64 {
    let r = &mut *r;
    let parts = std::slice::from_raw_parts(parts, n);
    let ends = std::slice::from_raw_parts(ends, n);
    let done = std::slice::from_raw_parts_mut(done, n);
    *timed_out = 0;
    while r.partitions.len() < max_records && done.iter().any(|&d| d == 0) {
        let m = poll(rk, timeout_ms);
        if m.is_null() {
            *timed_out = 1;
            break;
        }
        let msg = &*m;
        if msg.err == 0 {
            if let Some(i) = parts.iter().position(|&p| p == msg.partition) {
                if done[i] != 0 || msg.offset >= ends[i] {
                    done[i] = 1;
                } else {
                    r.keys.push(msg.key, msg.key_len);
                    r.values.push(msg.payload, msg.len);
                    r.partitions.push(msg.partition);
                    r.offsets.push(msg.offset);
                    if msg.offset + 1 >= ends[i] {
                        done[i] = 1;
                    }
                }
            }
        }
        destroy(m);
    }
    r.partitions.len() as i64
}

fn pack(valid: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; (valid.len() + 7) / 8];
    for (i, &v) in valid.iter().enumerate() {
        if v != 0 {
            out[i / 8] |= 1 << (i % 8);
        }
    }
    out
}

/// The records a reader held, taken out of it whole: Python wraps these buffers as Arrow's
/// without a copy and frees them (onceflow_taken_free) when the last array over them goes.
pub struct Taken {
    keys: Binary,
    values: Binary,
    key_bits: Vec<u8>,
    value_bits: Vec<u8>,
    partitions: Vec<i32>,
    offsets: Vec<i64>,
}

/// The held records, taken: the reader holds none after.
///
/// # Safety
/// `r` came from onceflow_reader_new.
#[no_mangle]
pub unsafe extern "C" fn onceflow_reader_take(r: *mut Reader) -> *mut Taken {
    let r = &mut *r;
    let keys = std::mem::take(&mut r.keys);
    let values = std::mem::take(&mut r.values);
    let taken = Taken {
        key_bits: pack(&keys.valid),
        value_bits: pack(&values.valid),
        keys,
        values,
        partitions: std::mem::take(&mut r.partitions),
        offsets: std::mem::take(&mut r.offsets),
    };
    Box::into_raw(Box::new(taken))
}

/// # Safety
/// `t` came from onceflow_reader_take and is not used after.
#[no_mangle]
pub unsafe extern "C" fn onceflow_taken_free(t: *mut Taken) {
    if !t.is_null() {
        drop(Box::from_raw(t));
    }
}

/// One of the taken columns' buffers, `*len` its size in bytes: 0 the keys' validity bitmap, 1 their
/// offsets (i64), 2 their bytes; 3, 4, 5 the values' same; 6 the partitions (i32), 7 the offsets (i64).
///
/// # Safety
/// `t` came from onceflow_reader_take; `len` points to a size_t.
#[no_mangle]
pub unsafe extern "C" fn onceflow_taken_buffer(t: *const Taken, which: i32, len: *mut usize) -> *const u8 {
    let t = &*t;
    let (ptr, n) = match which {
        0 => (t.key_bits.as_ptr(), t.key_bits.len()),
        1 => (t.keys.offsets.as_ptr() as *const u8, t.keys.offsets.len() * 8),
        2 => (t.keys.data.as_ptr(), t.keys.data.len()),
        3 => (t.value_bits.as_ptr(), t.value_bits.len()),
        4 => (t.values.offsets.as_ptr() as *const u8, t.values.offsets.len() * 8),
        5 => (t.values.data.as_ptr(), t.values.data.len()),
        6 => (t.partitions.as_ptr() as *const u8, t.partitions.len() * 4),
        7 => (t.offsets.as_ptr() as *const u8, t.offsets.len() * 8),
        _ => (std::ptr::null(), 0),
    };
    *len = n;
    ptr
}

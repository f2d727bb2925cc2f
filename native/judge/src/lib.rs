//! The audit's columnar judge, compiled (src/onceflow/audit/native_judge.py loads it with ctypes).
//!
//! It reads a batch of raw Kafka values and is *sure* only of the plain valid records of
//! docs/validation.md: a JSON object (UTF-8, no duplicate or escaped key at any depth, no deeper
//! than the limit, no lone surrogate or NUL escape, no run of number characters longer than the
//! limit) whose declared fields are present or optional, of their types, with values that read
//! exactly and keep their rules. Of such a record it writes the typed values in Arrow's layout; of every other record it
//! writes "not sure", and the reference judge (schema/reference.py) reads that record instead.
//!
//! It decides what the DuckDB columnar judge (audit/columnar_judge.py) decides, a record at a time
//! instead of a query of regular expressions, and is sure besides of records whose undeclared
//! members nest (the query reads flat objects only); the Hypothesis differential tests hold both to
//! the reference on records from the whole space, and this one to the query.

use std::slice;

#[derive(Clone, Copy, PartialEq)]
enum Base {
    Str,
    Int,
    Long,
    Double,
    Decimal,
    Bool,
    Timestamp,
    Date,
}

/// A min or max, as the Python side worked it out exactly: an integer bound on the value (an
/// int's, or a decimal's in units of its scale), a double's, or one no value can be sure to keep.
#[derive(Clone, Copy)]
enum Bound {
    Int(i128),
    Float(f64),
    Never,
}

struct Field {
    key: Vec<u8>,
    base: Base,
    required: bool,
    scale: u32,
    whole: u32, // precision - scale: a decimal's digits before the point
    allowed_str: Vec<Vec<u8>>,
    allowed_int: Vec<i64>,
    has_allowed: bool,
    min: Option<Bound>,
    max: Option<Bound>,
    max_length: Option<usize>,
    uuid: bool,
}

struct Spec {
    max_bytes: usize,
    max_number_chars: usize,
    max_depth: usize,
    fields: Vec<Field>,
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s == "-" {
        return Some(Vec::new());
    }
    let b = s.as_bytes();
    if b.len() % 2 != 0 {
        return None;
    }
    let mut out = Vec::with_capacity(b.len() / 2);
    for pair in b.chunks(2) {
        let hi = (pair[0] as char).to_digit(16)?;
        let lo = (pair[1] as char).to_digit(16)?;
        out.push((hi * 16 + lo) as u8);
    }
    Some(out)
}

/// The spec: a line a setting, written by native_judge.spec_text.
fn parse_spec(text: &str) -> Option<Spec> {
    let mut spec = Spec { max_bytes: 0, max_number_chars: 0, max_depth: 0, fields: Vec::new() };
    for line in text.lines() {
        let t: Vec<&str> = line.split_whitespace().collect();
        if t.is_empty() {
            continue;
        }
        let arg = |i: usize| t.get(i).copied();
        match t[0] {
            "max_bytes" => spec.max_bytes = arg(1)?.parse().ok()?,
            "max_number_chars" => spec.max_number_chars = arg(1)?.parse().ok()?,
            "max_depth" => spec.max_depth = arg(1)?.parse().ok()?,
            "field" => {
                let base = match arg(2)? {
                    "string" => Base::Str,
                    "int" => Base::Int,
                    "long" => Base::Long,
                    "double" => Base::Double,
                    "decimal" => Base::Decimal,
                    "boolean" => Base::Bool,
                    "timestamp" => Base::Timestamp,
                    "date" => Base::Date,
                    _ => return None,
                };
                let precision: u32 = arg(4)?.parse().ok()?;
                let scale: u32 = arg(5)?.parse().ok()?;
                if base == Base::Decimal && (precision > 38 || scale > precision) {
                    return None;
                }
                spec.fields.push(Field {
                    key: unhex(arg(1)?)?,
                    base,
                    required: arg(3)? == "1",
                    scale,
                    whole: precision.saturating_sub(scale),
                    allowed_str: Vec::new(),
                    allowed_int: Vec::new(),
                    has_allowed: false,
                    min: None,
                    max: None,
                    max_length: None,
                    uuid: false,
                });
            }
            rule => {
                let f = spec.fields.last_mut()?;
                let bound = |kind: &str| -> Option<Bound> {
                    match kind {
                        "int" => Some(Bound::Int(arg(2)?.parse().ok()?)),
                        "float" => Some(Bound::Float(arg(2)?.parse().ok()?)),
                        "never" => Some(Bound::Never),
                        _ => None,
                    }
                };
                match rule {
                    "allowed_str" => {
                        f.has_allowed = true;
                        f.allowed_str.push(unhex(arg(1)?)?)
                    }
                    "allowed_int" => {
                        f.has_allowed = true;
                        f.allowed_int.push(arg(1)?.parse().ok()?)
                    }
                    "min" => f.min = Some(bound(arg(1)?)?),
                    "max" => f.max = Some(bound(arg(1)?)?),
                    "max_length" => f.max_length = Some(arg(1)?.parse().ok()?),
                    "uuid" => f.uuid = true,
                    _ => return None,
                }
            }
        }
    }
    Some(spec)
}

// ---- the flat object ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Text { escaped: bool },
    Number,
    True,
    False,
    Null,
    Nested, // an object or an array (never a declared field's value: the reference calls that a wrong type)
}

/// One member of a flat object: its key's bytes and its value's literal (a string with its quotes).
struct Member {
    key: (usize, usize),
    lit: (usize, usize),
    kind: Kind,
}

fn is_ws(c: u8) -> bool {
    c == b' ' || c == b'\t' || c == b'\n' || c == b'\r'
}

fn skip_ws(t: &[u8], mut i: usize) -> usize {
    while i < t.len() && is_ws(t[i]) {
        i += 1;
    }
    i
}

fn hex4(t: &[u8], i: usize) -> Option<u32> {
    if i + 4 > t.len() {
        return None;
    }
    let mut v = 0u32;
    for &c in &t[i..i + 4] {
        v = v * 16 + (c as char).to_digit(16)?;
    }
    Some(v)
}

/// A key from just after its opening quote: its end (the closing quote's index), or None when it
/// holds an escape or a control character (then the record is not plain).
fn key_end(t: &[u8], mut i: usize) -> Option<usize> {
    while i < t.len() {
        match t[i] {
            b'"' => return Some(i),
            b'\\' => return None,
            c if c < 0x20 => return None,
            _ => i += 1,
        }
    }
    None
}

/// A string value from just after its opening quote: (the closing quote's index, whether it holds
/// an escape), or None when malformed, or when it escapes a NUL or a lone surrogate (left to the
/// reference judge).
fn text_end(t: &[u8], mut i: usize) -> Option<(usize, bool)> {
    let mut escaped = false;
    while i < t.len() {
        match t[i] {
            b'"' => return Some((i, escaped)),
            b'\\' => {
                escaped = true;
                match *t.get(i + 1)? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                    b'u' => {
                        let u = hex4(t, i + 2)?;
                        if u == 0 || (0xDC00..0xE000).contains(&u) {
                            return None;
                        }
                        if (0xD800..0xDC00).contains(&u) {
                            if t.get(i + 6) != Some(&b'\\') || t.get(i + 7) != Some(&b'u') {
                                return None;
                            }
                            let low = hex4(t, i + 8)?;
                            if !(0xDC00..0xE000).contains(&low) {
                                return None;
                            }
                            i += 12;
                        } else {
                            i += 6;
                        }
                    }
                    _ => return None,
                }
            }
            c if c < 0x20 => return None,
            _ => i += 1,
        }
    }
    None
}

fn digits_from(t: &[u8], mut i: usize) -> usize {
    while i < t.len() && t[i].is_ascii_digit() {
        i += 1;
    }
    i
}

/// JSON's number grammar from `i`: the literal's end, or None.
fn number_end(t: &[u8], mut i: usize) -> Option<usize> {
    if t.get(i) == Some(&b'-') {
        i += 1;
    }
    match t.get(i) {
        Some(b'0') => i += 1,
        Some(c) if c.is_ascii_digit() => i = digits_from(t, i),
        _ => return None,
    }
    if t.get(i) == Some(&b'.') {
        let j = digits_from(t, i + 1);
        if j == i + 1 {
            return None;
        }
        i = j;
    }
    if matches!(t.get(i), Some(b'e') | Some(b'E')) {
        i += 1;
        if matches!(t.get(i), Some(b'+') | Some(b'-')) {
            i += 1;
        }
        let j = digits_from(t, i);
        if j == i {
            return None;
        }
        i = j;
    }
    Some(i)
}

/// Whether the keys (each without an escape) hold a duplicate.
fn duplicates(t: &[u8], keys: &[(usize, usize)]) -> bool {
    if keys.len() <= 16 {
        return keys.iter().enumerate().any(|(a, k)| keys[..a].iter().any(|o| t[o.0..o.1] == t[k.0..k.1]));
    }
    let mut seen = std::collections::HashSet::with_capacity(keys.len());
    !keys.iter().all(|k| seen.insert(&t[k.0..k.1]))
}

/// A nested value (an object or an array at `depth`, the record's object being depth 1) from its
/// opening bracket: its end, or None when it is not JSON the judge is sure of: deeper than
/// `max_depth`, a key with an escape, a duplicate key, an escape of a NUL or a lone surrogate.
fn nested_end(t: &[u8], mut i: usize, depth: usize, max_depth: usize) -> Option<usize> {
    if depth > max_depth {
        return None;
    }
    let object = t[i] == b'{';
    let close = if object { b'}' } else { b']' };
    i = skip_ws(t, i + 1);
    if t.get(i) == Some(&close) {
        return Some(i + 1);
    }
    let mut keys: Vec<(usize, usize)> = Vec::new();
    loop {
        if object {
            if t.get(i) != Some(&b'"') {
                return None;
            }
            let kend = key_end(t, i + 1)?;
            keys.push((i + 1, kend));
            i = skip_ws(t, kend + 1);
            if t.get(i) != Some(&b':') {
                return None;
            }
            i = skip_ws(t, i + 1);
        }
        i = value_end(t, i, depth + 1, max_depth)?.0;
        i = skip_ws(t, i);
        match t.get(i) {
            Some(b',') => i = skip_ws(t, i + 1),
            Some(&c) if c == close => break,
            _ => return None,
        }
    }
    if object && duplicates(t, &keys) {
        return None;
    }
    Some(i + 1)
}

/// A JSON value from `i` (at `depth` if nested): its end and kind, or None.
fn value_end(t: &[u8], i: usize, depth: usize, max_depth: usize) -> Option<(usize, Kind)> {
    Some(match *t.get(i)? {
        b'"' => {
            let (end, escaped) = text_end(t, i + 1)?;
            (end + 1, Kind::Text { escaped })
        }
        b'{' | b'[' => (nested_end(t, i, depth, max_depth)?, Kind::Nested),
        b't' if t[i..].starts_with(b"true") => (i + 4, Kind::True),
        b'f' if t[i..].starts_with(b"false") => (i + 5, Kind::False),
        b'n' if t[i..].starts_with(b"null") => (i + 4, Kind::Null),
        _ => (number_end(t, i)?, Kind::Number),
    })
}

/// The members of a JSON object, or None when the text is not one the judge is sure of:
/// `ws { ws (member (ws , ws member)*)? ws } ws`, a member `"key" ws : ws value` (no escape in a
/// key), a value a string, a number, true, false, null, or an object or array within `max_depth`.
fn object_members(t: &[u8], out: &mut Vec<Member>, max_depth: usize) -> Option<()> {
    out.clear();
    let mut i = skip_ws(t, 0);
    if t.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_ws(t, i + 1);
    if t.get(i) == Some(&b'}') {
        return if skip_ws(t, i + 1) == t.len() { Some(()) } else { None };
    }
    loop {
        if t.get(i) != Some(&b'"') {
            return None;
        }
        let kend = key_end(t, i + 1)?;
        let key = (i + 1, kend);
        i = skip_ws(t, kend + 1);
        if t.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(t, i + 1);
        let start = i;
        let (end, kind) = value_end(t, i, 2, max_depth)?;
        i = end;
        out.push(Member { key, lit: (start, i), kind });
        i = skip_ws(t, i);
        match t.get(i) {
            Some(b',') => i = skip_ws(t, i + 1),
            Some(b'}') => return if skip_ws(t, i + 1) == t.len() { Some(()) } else { None },
            _ => return None,
        }
    }
}

/// Whether the text holds more than `limit` number characters in a row (anywhere, strings too).
fn long_run(t: &[u8], limit: usize) -> bool {
    if t.len() <= limit {
        return false;
    }
    let mut run = 0usize;
    for &c in t {
        if c.is_ascii_digit() || matches!(c, b'+' | b'.' | b'e' | b'E' | b'-') {
            run += 1;
            if run > limit {
                return true;
            }
        } else {
            run = 0;
        }
    }
    false
}

fn distinct_keys(t: &[u8], members: &[Member]) -> bool {
    let keys: Vec<(usize, usize)> = members.iter().map(|m| m.key).collect();
    !duplicates(t, &keys)
}

/// A string's content, its escapes decoded (text_end admitted only well-formed ones).
fn decode_into(raw: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let mut i = 0;
    while i < raw.len() {
        if raw[i] != b'\\' {
            let j = raw[i..].iter().position(|&c| c == b'\\').map_or(raw.len(), |p| i + p);
            out.extend_from_slice(&raw[i..j]);
            i = j;
            continue;
        }
        let c = raw[i + 1];
        i += 2;
        let simple = match c {
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => 8,
            b'f' => 12,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            _ => 0,
        };
        if c != b'u' {
            out.push(simple);
            continue;
        }
        let mut u = hex4(raw, i).unwrap_or(0xFFFD);
        i += 4;
        if (0xD800..0xDC00).contains(&u) {
            let low = hex4(raw, i + 2).unwrap_or(0xDC00);
            u = 0x10000 + ((u - 0xD800) << 10) + (low - 0xDC00);
            i += 6;
        }
        let ch = char::from_u32(u).unwrap_or('\u{FFFD}');
        let mut buf = [0u8; 4];
        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
    }
}

// ---- typed values ------------------------------------------------------------------------------

/// `-?(0|[1-9][0-9]{0,17})(\.F)?` where F is `0{1,20}` (`zeros_only`) or `[0-9]{1,20}`: the
/// integer part's value, or None.
fn plain_number(lit: &[u8], zeros_only: bool) -> Option<i64> {
    let (neg, rest) = match lit.split_first() {
        Some((b'-', r)) => (true, r),
        _ => (false, lit),
    };
    let end = rest.iter().position(|&c| c == b'.').unwrap_or(rest.len());
    let (whole, frac) = (&rest[..end], &rest[end..]);
    if whole.is_empty() || whole.len() > 18 || !whole.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if whole[0] == b'0' && whole.len() > 1 {
        return None;
    }
    if !frac.is_empty() {
        let f = &frac[1..];
        if f.is_empty() || f.len() > 20 {
            return None;
        }
        let ok = if zeros_only { f.iter().all(|&c| c == b'0') } else { f.iter().all(u8::is_ascii_digit) };
        if !ok {
            return None;
        }
    }
    let v: i64 = std::str::from_utf8(whole).ok()?.parse().ok()?;
    Some(if neg { -v } else { v })
}

/// read_decimal's text `-?([0-9]+)(\.([0-9]+))?` in units of 10^-scale, if it fits
/// decimal(whole + scale, scale) exactly (its leading and trailing zeros aside).
fn decimal_units(text: &[u8], whole_digits: u32, scale: u32) -> Option<i128> {
    let (neg, rest) = match text.split_first() {
        Some((b'-', r)) => (true, r),
        _ => (false, text),
    };
    let end = rest.iter().position(|&c| c == b'.').unwrap_or(rest.len());
    let whole = &rest[..end];
    let frac: &[u8] = if end < rest.len() { &rest[end + 1..] } else { &[] };
    if whole.is_empty() || !whole.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if end < rest.len() && (frac.is_empty() || !frac.iter().all(u8::is_ascii_digit)) {
        return None;
    }
    let w = &whole[whole.iter().position(|&c| c != b'0').unwrap_or(whole.len())..];
    let f = &frac[..frac.iter().rposition(|&c| c != b'0').map_or(0, |p| p + 1)];
    if w.len() > whole_digits as usize || f.len() > scale as usize {
        return None;
    }
    let mut units: i128 = 0;
    for &c in w {
        units = units * 10 + (c - b'0') as i128;
    }
    for k in 0..scale as usize {
        units = units * 10 + f.get(k).map_or(0, |&c| (c - b'0') as i128);
    }
    Some(if neg { -units } else { units })
}

fn num(t: &[u8]) -> i64 {
    t.iter().fold(0i64, |v, &c| v * 10 + (c - b'0') as i64)
}

fn all_digits(t: &[u8]) -> bool {
    t.iter().all(u8::is_ascii_digit)
}

/// Days since 1970-01-01 of a proleptic Gregorian date, if the date exists (year >= 1).
fn civil_days(y: i64, m: i64, d: i64) -> Option<i64> {
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let month_days = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    if y < 1 || !(1..=12).contains(&m) || d < 1 || d > month_days[(m - 1) as usize] {
        return None;
    }
    // Howard Hinnant's days_from_civil
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146097 + doe - 719468)
}

/// `YYYY-MM-DD`, a date that exists from year 1 on: its days since the epoch.
fn read_date(t: &[u8]) -> Option<i64> {
    if t.len() != 10 || t[4] != b'-' || t[7] != b'-' {
        return None;
    }
    let (y, m, d) = (&t[0..4], &t[5..7], &t[8..10]);
    if !all_digits(y) || !all_digits(m) || !all_digits(d) {
        return None;
    }
    civil_days(num(y), num(m), num(d))
}

const MICROS_PER_DAY: i64 = 86_400_000_000;

/// read_timestamp's grammar `YYYY-MM-DDTHH:MM:SS(.f{1,6})?(Z|±HH:MM)`: the instant in
/// microseconds since the epoch (UTC), within years 0001-9999, the offset at most 18:00.
fn read_timestamp(t: &[u8]) -> Option<i64> {
    if t.len() < 20 {
        return None;
    }
    let days = read_date(&t[..10])?;
    if t[10] != b'T' || t[13] != b':' || t[16] != b':' {
        return None;
    }
    let (h, mi, s) = (&t[11..13], &t[14..16], &t[17..19]);
    if !all_digits(h) || !all_digits(mi) || !all_digits(s) {
        return None;
    }
    let (h, mi, s) = (num(h), num(mi), num(s));
    if h > 23 || mi > 59 || s > 59 {
        return None;
    }
    let mut i = 19;
    let mut micros = 0i64;
    if t[i] == b'.' {
        let end = digits_from(t, i + 1);
        let n = end - (i + 1);
        if n == 0 || n > 6 {
            return None;
        }
        micros = num(&t[i + 1..end]) * 10i64.pow((6 - n) as u32);
        i = end;
    }
    let zone = &t[i..];
    let offset_minutes = if zone == b"Z" {
        0
    } else {
        if zone.len() != 6 || !matches!(zone[0], b'+' | b'-') || zone[3] != b':' {
            return None;
        }
        let (zh, zm) = (&zone[1..3], &zone[4..6]);
        if !all_digits(zh) || !all_digits(zm) {
            return None;
        }
        let minutes = num(zh) * 60 + num(zm);
        if num(zm) > 59 || minutes > 18 * 60 {
            return None;
        }
        if zone[0] == b'-' {
            -minutes
        } else {
            minutes
        }
    };
    let local = days * MICROS_PER_DAY + ((h * 60 + mi) * 60 + s) * 1_000_000 + micros;
    let instant = local - offset_minutes * 60_000_000;
    let first = civil_days(1, 1, 1)? * MICROS_PER_DAY;
    let past = (civil_days(9999, 12, 31)? + 1) * MICROS_PER_DAY;
    if instant < first || instant >= past {
        return None;
    }
    Some(instant)
}

fn is_uuid(t: &[u8]) -> bool {
    t.len() == 36
        && t.iter().enumerate().all(|(i, &c)| if matches!(i, 8 | 13 | 18 | 23) { c == b'-' } else { c.is_ascii_hexdigit() })
}

fn keeps(b: Option<Bound>, v: Value, min: bool) -> bool {
    let ok = |o: std::cmp::Ordering| if min { o != std::cmp::Ordering::Less } else { o != std::cmp::Ordering::Greater };
    match (b, v) {
        (None, _) => true,
        (Some(Bound::Never), _) => false,
        (Some(Bound::Int(x)), Value::I(v)) => ok((v as i128).cmp(&x)),
        (Some(Bound::Int(x)), Value::D(v)) => ok(v.cmp(&x)),
        (Some(Bound::Float(x)), Value::F(v)) => v.partial_cmp(&x).map_or(false, ok),
        _ => false,
    }
}

#[derive(Clone, Copy)]
enum Value {
    I(i64),
    D(i128),
    F(f64),
    B(bool),
    T(i64),
    Day(i32),
    Text,
}

/// A present field's typed value if it reads exactly and keeps its rules (`text` holds a string's
/// content, as the judge reads it: decoded, or a numeric field's as written), or None.
fn field_value(f: &Field, t: &[u8], m: &Member, text: &mut Vec<u8>) -> Option<Value> {
    let lit = &t[m.lit.0..m.lit.1];
    let is_text = matches!(m.kind, Kind::Text { .. });
    if is_text {
        let inner = &lit[1..lit.len() - 1];
        let numeric = matches!(f.base, Base::Int | Base::Long | Base::Double | Base::Decimal);
        match m.kind {
            Kind::Text { escaped: true } if !numeric => decode_into(inner, text),
            _ => {
                text.clear();
                text.extend_from_slice(inner);
            }
        }
    }
    let value = match f.base {
        Base::Str if is_text => Value::Text,
        Base::Bool => match m.kind {
            Kind::True => Value::B(true),
            Kind::False => Value::B(false),
            _ => return None,
        },
        Base::Int | Base::Long if m.kind == Kind::Number => {
            let v = plain_number(lit, true)?;
            if f.base == Base::Int && (v < i32::MIN as i64 || v > i32::MAX as i64) {
                return None;
            }
            Value::I(v)
        }
        Base::Double if m.kind == Kind::Number => {
            plain_number(lit, false)?;
            Value::F(std::str::from_utf8(lit).ok()?.parse().ok()?)
        }
        Base::Decimal => {
            let digits = match m.kind {
                Kind::Number => {
                    plain_number(lit, false)?;
                    lit
                }
                Kind::Text { .. } => &text[..],
                _ => return None,
            };
            Value::D(decimal_units(digits, f.whole, f.scale)?)
        }
        Base::Date if is_text => Value::Day(read_date(text)? as i32),
        Base::Timestamp if is_text => Value::T(read_timestamp(text)?),
        _ => return None,
    };
    if f.has_allowed {
        let listed = match value {
            Value::Text => f.allowed_str.iter().any(|a| a[..] == text[..]),
            Value::I(v) => f.allowed_int.contains(&v),
            _ => false,
        };
        if !listed {
            return None;
        }
    }
    if !keeps(f.min, value, true) || !keeps(f.max, value, false) {
        return None;
    }
    if let Some(n) = f.max_length {
        if !is_text || std::str::from_utf8(text).ok()?.chars().count() > n {
            return None;
        }
    }
    if f.uuid && !(is_text && is_uuid(text)) {
        return None;
    }
    Some(value)
}

// ---- the batch ---------------------------------------------------------------------------------

fn set_bit(bits: &mut [u8], i: usize) {
    bits[i / 8] |= 1 << (i % 8);
}

/// Where one field's output goes: Arrow buffers the caller allocated (validity bitmap, values or
/// large-string offsets, and a string's data: as large as the input's data, which a decoded string
/// never outgrows).
struct Out<'a> {
    validity: &'a mut [u8],
    values: &'a mut [u8],
    data: Option<&'a mut [u8]>,
    data_len: usize,
}

fn width(base: Base) -> usize {
    match base {
        Base::Int | Base::Date => 4,
        Base::Decimal => 16,
        Base::Bool => 0,
        Base::Str => 8,
        _ => 8,
    }
}

/// Judges `n` values (Arrow binary: `offsets` 32 or 64 bits wide, `data`, a `validity` bitmap or
/// null, starting at bit `validity_offset`) by the spec; writes `sure` (a bitmap) and, per declared
/// field in order, three buffers at `outs` (validity, values, a string's data; a boolean's values a
/// bitmap). Returns how many records it is sure of, or -1 when the spec cannot be read.
///
/// # Safety
/// The caller passes buffers of the sizes native_judge.py allocates for `n` rows.
#[no_mangle]
pub unsafe extern "C" fn onceflow_judge(
    spec: *const u8,
    spec_len: usize,
    n: usize,
    offsets: *const u8,
    wide_offsets: i32,
    data: *const u8,
    data_len: usize,
    validity: *const u8,
    validity_offset: usize,
    sure: *mut u8,
    outs: *const *mut u8,
) -> i64 {
    // written for Rust 1.63 (Debian 12's cargo) too: no let-else, no div_ceil
    let spec = match std::str::from_utf8(slice::from_raw_parts(spec, spec_len)).ok().and_then(parse_spec) {
        Some(spec) => spec,
        None => return -1,
    };
    let bitmap = (n + 7) / 8;
    let sure = slice::from_raw_parts_mut(sure, bitmap);
    sure.fill(0);
    let outs = slice::from_raw_parts(outs, spec.fields.len() * 3);
    let mut out: Vec<Out> = Vec::with_capacity(spec.fields.len());
    for (k, f) in spec.fields.iter().enumerate() {
        let validity = slice::from_raw_parts_mut(outs[3 * k], bitmap);
        validity.fill(0);
        let size = match f.base {
            Base::Bool => bitmap,
            Base::Str => 8 * (n + 1),
            b => width(b) * n,
        };
        let values = slice::from_raw_parts_mut(outs[3 * k + 1], size);
        values.fill(0);
        let data = if f.base == Base::Str { Some(slice::from_raw_parts_mut(outs[3 * k + 2], data_len)) } else { None };
        out.push(Out { validity, values, data, data_len: 0 });
    }
    let data = slice::from_raw_parts(data, data_len);
    let offset = |i: usize| -> usize {
        if wide_offsets != 0 {
            (offsets as *const i64).add(i).read_unaligned() as usize
        } else {
            (offsets as *const i32).add(i).read_unaligned() as usize
        }
    };
    let present = |i: usize| -> bool {
        validity.is_null() || {
            let b = validity_offset + i;
            *validity.add(b / 8) & (1 << (b % 8)) != 0
        }
    };
    let mut members: Vec<Member> = Vec::new();
    let mut texts: Vec<Vec<u8>> = vec![Vec::new(); spec.fields.len()];
    let mut values: Vec<Option<Value>> = vec![None; spec.fields.len()];
    let mut sure_count = 0i64;
    for i in 0..n {
        let t = &data[offset(i)..offset(i + 1)];
        let plain = present(i)
            && t.len() <= spec.max_bytes
            && std::str::from_utf8(t).is_ok()
            && object_members(t, &mut members, spec.max_depth).is_some()
            && !long_run(t, spec.max_number_chars)
            && distinct_keys(t, &members);
        let mut ok = plain;
        if plain {
            for (k, f) in spec.fields.iter().enumerate() {
                let m = members.iter().find(|m| t[m.key.0..m.key.1] == f.key[..]);
                values[k] = None;
                match m {
                    Some(m) if m.kind != Kind::Null => match field_value(f, t, m, &mut texts[k]) {
                        Some(v) => values[k] = Some(v),
                        None => {
                            ok = false;
                            break;
                        }
                    },
                    _ if f.required => {
                        ok = false;
                        break;
                    }
                    _ => {}
                }
            }
        }
        if ok {
            sure_count += 1;
            set_bit(sure, i);
            for (k, f) in spec.fields.iter().enumerate() {
                let o = &mut out[k];
                if let Some(v) = values[k] {
                    set_bit(o.validity, i);
                    let w = width(f.base);
                    match v {
                        Value::I(x) if f.base == Base::Int => o.values[4 * i..4 * i + 4].copy_from_slice(&(x as i32).to_le_bytes()),
                        Value::I(x) | Value::T(x) => o.values[8 * i..8 * i + 8].copy_from_slice(&x.to_le_bytes()),
                        Value::F(x) => o.values[8 * i..8 * i + 8].copy_from_slice(&x.to_le_bytes()),
                        Value::D(x) => o.values[w * i..w * i + w].copy_from_slice(&x.to_le_bytes()),
                        Value::Day(x) => o.values[4 * i..4 * i + 4].copy_from_slice(&x.to_le_bytes()),
                        Value::B(x) => {
                            if x {
                                set_bit(o.values, i)
                            }
                        }
                        Value::Text => {
                            let text = &texts[k];
                            if let Some(d) = o.data.as_deref_mut() {
                                d[o.data_len..o.data_len + text.len()].copy_from_slice(text);
                            }
                            o.data_len += text.len();
                        }
                    }
                }
            }
        }
        for (k, f) in spec.fields.iter().enumerate() {
            if f.base == Base::Str {
                let o = &mut out[k];
                o.values[8 * (i + 1)..8 * (i + 2)].copy_from_slice(&(o.data_len as i64).to_le_bytes());
            }
        }
    }
    sure_count
}

pub mod read;

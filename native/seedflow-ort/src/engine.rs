//! Sessions, kept tensors and runs through IoBinding. A run binds its feeds as views over the caller's memory, kept
//! tensors as views over the engine's (the first `rows` along axis 0 when asked), in-place outputs to the kept
//! tensor's own memory, and every other output to the session's device; slices of an output are written into a
//! kept tensor without coming back to the caller.

use std::collections::HashMap;
use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::{Arc, Mutex};

use ort_sys::{ExecutionMode, GraphOptimizationLevel, OrtIoBinding, OrtSession, OrtSessionOptions, OrtValue};

use crate::ort::{Ort, Value, check, cstring, dtype_name, element_type, no_options};

pub struct Config {
  pub threads: i32,
  pub optimization: GraphOptimizationLevel,
  pub memory_arena: bool,
}

pub struct Session {
  ptr: *mut OrtSession,
  ort: &'static Ort,
  pub inputs: Vec<String>,
  pub outputs: Vec<String>,
}

unsafe impl Send for Session {}
unsafe impl Sync for Session {}

impl Drop for Session {
  fn drop(&mut self) {
    unsafe { (self.ort.api.ReleaseSession)(self.ptr) };
  }
}

/// A tensor the engine owns, in ORT-allocated memory.
pub struct Kept {
  value: Value,
  data: *mut u8,
  pub dtype: &'static str,
  pub dims: Vec<i64>,
  pub bytes: usize,
}

unsafe impl Send for Kept {}
unsafe impl Sync for Kept {}

pub type KeptSet = HashMap<String, Arc<Kept>>;

/// A feed from the caller: a view over its memory (valid for the run).
pub struct Feed {
  pub name: String,
  pub dtype: String,
  pub dims: Vec<i64>,
  pub data: *mut u8,
  pub bytes: usize,
}

unsafe impl Send for Feed {}

pub struct KeptFeed {
  pub name: String,
  pub tensor: Arc<Kept>,
  pub rows: Option<i64>,
}

pub struct Write {
  pub output: String,
  pub name: String,
  pub tensor: Arc<Kept>,
  pub axis: usize,
  /// (from, row, at)
  pub slices: Vec<(i64, i64, i64)>,
}

pub struct Output {
  pub name: String,
  pub dtype: &'static str,
  pub dims: Vec<i64>,
  pub data: Vec<u8>,
}

pub fn create_session(ort: &'static Ort, config: &Config, model: SessionSource) -> Result<Session, String> {
  let api = ort.api;
  let mut options: *mut OrtSessionOptions = null_mut();
  check(api, unsafe { (api.CreateSessionOptions)(&mut options) })?;
  let made = (|| -> Result<*mut OrtSession, String> {
    check(api, unsafe { (api.SetIntraOpNumThreads)(options, config.threads) })?;
    check(api, unsafe { (api.SetInterOpNumThreads)(options, 1) })?;
    check(api, unsafe { (api.SetSessionExecutionMode)(options, ExecutionMode::ORT_SEQUENTIAL) })?;
    check(api, unsafe { (api.SetSessionGraphOptimizationLevel)(options, config.optimization) })?;
    check(api, unsafe { (api.SetSessionLogSeverityLevel)(options, 3) })?;
    if !config.memory_arena {
      check(api, unsafe { (api.DisableCpuMemArena)(options) })?;
    }
    let mut session: *mut OrtSession = null_mut();
    match model {
      SessionSource::Bytes(bytes) => check(api, unsafe {
        (api.CreateSessionFromArray)(ort.env, bytes.as_ptr() as *const c_void, bytes.len(), options, &mut session)
      })?,
      SessionSource::Path(path) => {
        let path = cstring(path)?;
        check(api, unsafe { (api.CreateSession)(ort.env, path.as_ptr(), options, &mut session) })?
      }
    }
    Ok(session)
  })();
  unsafe { (api.ReleaseSessionOptions)(options) };
  let ptr = made?;
  let names = |count: unsafe extern "system" fn(*const OrtSession, *mut usize) -> ort_sys::OrtStatusPtr,
               name: unsafe extern "system" fn(
    *const OrtSession,
    usize,
    *mut ort_sys::OrtAllocator,
    *mut *mut std::ffi::c_char,
  ) -> ort_sys::OrtStatusPtr|
   -> Result<Vec<String>, String> {
    let mut n = 0usize;
    check(api, unsafe { count(ptr, &mut n) })?;
    (0..n)
      .map(|i| {
        let mut p = null_mut();
        check(api, unsafe { name(ptr, i, ort.allocator, &mut p) })?;
        Ok(ort.string(p))
      })
      .collect()
  };
  // owned from here: released on drop, also when reading the names fails
  let mut session = Session { ptr, ort, inputs: vec![], outputs: vec![] };
  session.inputs = names(api.SessionGetInputCount, api.SessionGetInputName)?;
  session.outputs = names(api.SessionGetOutputCount, api.SessionGetOutputName)?;
  Ok(session)
}

pub enum SessionSource<'a> {
  Bytes(&'a [u8]),
  Path(&'a str),
}

/// A zero-filled tensor, or one holding a copy of `data`.
pub fn keep(ort: &'static Ort, dtype: &str, dims: &[i64], data: Option<&[u8]>) -> Result<Kept, String> {
  let (t, size) = element_type(dtype)?;
  let count: i64 = dims.iter().product();
  let bytes = count as usize * size;
  if let Some(d) = data
    && d.len() != bytes
  {
    return Err(format!("{} bytes for a {dtype} tensor of {count} elements", d.len()));
  }
  let (value, ptr) = ort.allocate(dims, t, bytes)?;
  if let Some(d) = data {
    unsafe { std::ptr::copy_nonoverlapping(d.as_ptr(), ptr, bytes) };
  }
  Ok(Kept { value, data: ptr, dtype: dtype_name(t)?, dims: dims.to_vec(), bytes })
}

impl Kept {
  pub fn bytes_of(&self) -> Vec<u8> {
    unsafe { std::slice::from_raw_parts(self.data, self.bytes) }.to_vec()
  }

  /// A view of the first `rows` entries along axis 0 (all of them without `rows`).
  fn view(&self, ort: &'static Ort, rows: Option<i64>, name: &str) -> Result<Value, String> {
    let _ = &self.value;
    let (t, size) = element_type(self.dtype)?;
    let mut dims = self.dims.clone();
    if let Some(r) = rows {
      let all = dims.first().copied().unwrap_or(0);
      if r < 1 || r > all {
        return Err(format!("kept tensor {name}: {r} rows asked, it has {all}"));
      }
      dims[0] = r;
    }
    let count: i64 = dims.iter().product();
    ort.view(self.data as *mut c_void, count as usize * size, &dims, t)
  }
}

/// Runs `session` on the feeds and kept feeds; returns the fetched outputs that are neither in place nor written.
pub fn run(
  ort: &'static Ort,
  session: &Session,
  feeds: &[Feed],
  kept: &[KeptFeed],
  fetches: &[String],
  in_place: &HashMap<String, usize>,
  writes: &[Write],
) -> Result<Vec<Output>, String> {
  let api = ort.api;
  let mut binding: *mut OrtIoBinding = null_mut();
  check(api, unsafe { (api.CreateIoBinding)(session.ptr, &mut binding) })?;
  struct Binding(*mut OrtIoBinding, &'static ort_sys::OrtApi);
  impl Drop for Binding {
    fn drop(&mut self) {
      unsafe { (self.1.ReleaseIoBinding)(self.0) };
    }
  }
  let binding = Binding(binding, api);
  let mut held: Vec<Value> = Vec::new();
  for feed in feeds {
    let (t, _) = element_type(&feed.dtype)?;
    let value = ort.view(feed.data as *mut c_void, feed.bytes, &feed.dims, t)?;
    let name = cstring(&feed.name)?;
    check(api, unsafe { (api.BindInput)(binding.0, name.as_ptr(), value.ptr) })?;
    held.push(value);
  }
  let mut kept_views: HashMap<&str, usize> = HashMap::new();
  for k in kept {
    let value = k.tensor.view(ort, k.rows, &k.name)?;
    let name = cstring(&k.name)?;
    check(api, unsafe { (api.BindInput)(binding.0, name.as_ptr(), value.ptr) })?;
    kept_views.insert(&k.name, held.len());
    held.push(value);
  }
  for output in fetches {
    let name = cstring(output)?;
    match in_place.get(output) {
      Some(&k) => {
        let feed = &kept[k];
        let value = feed.tensor.view(ort, feed.rows, &feed.name)?;
        check(api, unsafe { (api.BindOutput)(binding.0, name.as_ptr(), value.ptr) })?;
        held.push(value);
      }
      None => check(api, unsafe { (api.BindOutputToDevice)(binding.0, name.as_ptr(), ort.cpu) })?,
    }
  }
  check(api, unsafe { (api.RunWithBinding)(session.ptr, no_options(), binding.0) })?;
  let mut values: *mut *mut OrtValue = null_mut();
  let mut count = 0usize;
  check(api, unsafe { (api.GetBoundOutputValues)(binding.0, ort.allocator, &mut values, &mut count) })?;
  let bound: Vec<Value> = (0..count).map(|i| ort.owned(unsafe { *values.add(i) })).collect();
  ort.free(values as *mut c_void);
  drop(held);
  let mut result = Vec::new();
  for (name, value) in fetches.iter().zip(bound.iter()) {
    if in_place.contains_key(name) {
      continue;
    }
    let (t, dims) = ort.shape(value.ptr)?;
    let (_, size) = element_type(dtype_name(t)?)?;
    let bytes = dims.iter().product::<i64>() as usize * size;
    let data = ort.data(value)?;
    let source = unsafe { std::slice::from_raw_parts(data, bytes) };
    match writes.iter().find(|w| &w.output == name) {
      Some(write) => write_slices(source, dtype_name(t)?, &dims, write)?,
      None => result.push(Output { name: name.clone(), dtype: dtype_name(t)?, dims, data: source.to_vec() }),
    }
  }
  Ok(result)
}

fn shape(dims: &[i64]) -> String {
  format!("[{}]", dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(","))
}

/// Copies slices of an output into a kept tensor (the messages are the JS engines', engine/runtime.ts).
fn write_slices(source: &[u8], dtype: &str, dims: &[i64], write: &Write) -> Result<(), String> {
  let target = &write.tensor;
  let what = format!("output {} into kept tensor {}", write.output, write.name);
  let rank = target.dims.len();
  if dtype != target.dtype || dims.len() != rank {
    return Err(format!("{what}: {dtype}{} into {}{}", shape(dims), target.dtype, shape(&target.dims)));
  }
  let axis = write.axis;
  if axis < 1 || axis >= rank {
    return Err(format!("{what}: axis {axis} is not one of 1..{}", rank - 1));
  }
  if (1..rank).any(|i| i != axis && target.dims[i] != dims[i]) {
    return Err(format!("{what}: {} and {} differ off axes 0 and {axis}", shape(dims), shape(&target.dims)));
  }
  let (_, size) = element_type(dtype)?;
  let outer: i64 = target.dims[1..axis].iter().product();
  let inner: i64 = target.dims[axis + 1..].iter().product();
  let span = dims[axis];
  let room = target.dims[axis];
  let chunk = (span * inner) as usize * size;
  for &(from, row, at) in &write.slices {
    if !(from >= 0 && from < dims[0] && row >= 0 && row < target.dims[0]) {
      return Err(format!("{what}: slice {from} → row {row} is out of range"));
    }
    if !(at >= 0 && at + span <= room) {
      return Err(format!("{what}: {span} at {at} exceed the {room} along axis {axis}"));
    }
    for o in 0..outer {
      let s = ((from * outer + o) * span * inner) as usize * size;
      let d = (((row * outer + o) * room + at) * inner) as usize * size;
      unsafe { std::ptr::copy_nonoverlapping(source.as_ptr().add(s), target.data.add(d), chunk) };
    }
  }
  Ok(())
}

/// The engine's state: sessions by model id, kept sets by handle id.
#[derive(Default)]
pub struct State {
  pub sessions: HashMap<String, Arc<Session>>,
  pub kept: HashMap<u32, KeptSet>,
  pub next_kept: u32,
}

pub type Shared = Arc<Mutex<State>>;

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
  /// The device provider, if any, before the CPU (which every session has last).
  pub device: Option<Provider>,
}

pub enum Provider {
  Cuda { device_id: i32, tf32: bool, memory_limit: Option<u64> },
  WebGpu,
}

impl Provider {
  /// ORT's name of this provider's device memory (its allocator's OrtMemoryInfo name).
  fn memory_name(&self) -> &'static str {
    match self {
      Provider::Cuda { .. } => "Cuda",
      Provider::WebGpu => "WebGPU_Buffer",
    }
  }

  fn device_id(&self) -> i32 {
    match self {
      Provider::Cuda { device_id, .. } => *device_id,
      Provider::WebGpu => 0,
    }
  }

  fn append(&self, ort: &Ort, options: *mut OrtSessionOptions) -> Result<(), String> {
    let api = ort.api;
    match self {
      Provider::Cuda { device_id, tf32, memory_limit } => {
        let mut cuda = null_mut();
        check(api, unsafe { (api.CreateCUDAProviderOptions)(&mut cuda) })?;
        let mut keys = vec![cstring("device_id")?, cstring("use_tf32")?];
        let mut values = vec![cstring(&device_id.to_string())?, cstring(if *tf32 { "1" } else { "0" })?];
        if let Some(limit) = memory_limit {
          keys.push(cstring("gpu_mem_limit")?);
          values.push(cstring(&limit.to_string())?);
        }
        let k: Vec<_> = keys.iter().map(|c| c.as_ptr()).collect();
        let v: Vec<_> = values.iter().map(|c| c.as_ptr()).collect();
        let done = check(api, unsafe { (api.UpdateCUDAProviderOptions)(cuda, k.as_ptr(), v.as_ptr(), k.len()) })
          .and_then(|_| check(api, unsafe { (api.SessionOptionsAppendExecutionProvider_CUDA_V2)(options, cuda) }));
        unsafe { (api.ReleaseCUDAProviderOptions)(cuda) };
        done
      }
      Provider::WebGpu => {
        let name = cstring("WebGPU")?;
        check(api, unsafe {
          (api.SessionOptionsAppendExecutionProvider)(options, name.as_ptr(), std::ptr::null(), std::ptr::null(), 0)
        })
      }
    }
  }
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

/// A tensor the engine owns, in ORT-allocated memory: the host's, or the device provider's.
pub struct Kept {
  /// Owns the memory `data` points into (released with the tensor); never read otherwise.
  _value: Value,
  /// The host address, or the device's (a CUDA address; a WebGPU buffer handle, only ever viewed from its start).
  data: *mut u8,
  info: *const ort_sys::OrtMemoryInfo,
  pub on_device: bool,
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
  /// The write graph (device engines): registered by the JS side for this element type, rank and axis.
  pub graph: Option<Arc<Session>>,
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
    if let Some(device) = &config.device {
      device.append(ort, options)?;
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

/// A zero-filled tensor, or one holding a copy of `data`: on the device when there is one.
pub fn keep(ort: &'static Ort, device: Option<&Device>, dtype: &str, dims: &[i64], data: Option<&[u8]>) -> Result<Kept, String> {
  let (t, size) = element_type(dtype)?;
  let count: i64 = dims.iter().product();
  let bytes = count as usize * size;
  if let Some(d) = data
    && d.len() != bytes
  {
    return Err(format!("{} bytes for a {dtype} tensor of {count} elements", d.len()));
  }
  let dtype = dtype_name(t)?;
  match device {
    None => {
      let (value, ptr) = ort.allocate(dims, t, bytes)?;
      if let Some(d) = data {
        unsafe { std::ptr::copy_nonoverlapping(d.as_ptr(), ptr, bytes) };
      }
      Ok(Kept { _value: value, data: ptr, info: ort.cpu, on_device: false, dtype, dims: dims.to_vec(), bytes })
    }
    Some(device) => {
      let value = ort.allocate_with(device.allocator, dims, t)?;
      let ptr = ort.data(&value)?;
      let kept = Kept { _value: value, data: ptr, info: device.info, on_device: true, dtype, dims: dims.to_vec(), bytes };
      let zeros;
      let host = match data {
        Some(d) => d,
        None => {
          zeros = vec![0u8; bytes];
          &zeros
        }
      };
      device.upload(&kept, host)?;
      Ok(kept)
    }
  }
}

impl Kept {
  /// A copy of the tensor's bytes in host memory.
  pub fn read(&self, device: Option<&Device>) -> Result<Vec<u8>, String> {
    match device {
      Some(d) if self.on_device => d.download(self),
      _ => Ok(unsafe { std::slice::from_raw_parts(self.data, self.bytes) }.to_vec()),
    }
  }

  fn element(&self) -> Result<ort_sys::ONNXTensorElementDataType, String> {
    Ok(element_type(self.dtype)?.0)
  }

  /// Its shape as one axis: what the copy models (Identity over a vector) take.
  fn flat(&self) -> [i64; 1] {
    [self.dims.iter().product()]
  }

  fn flat_view(&self, ort: &'static Ort) -> Result<Value, String> {
    ort.view_in(self.info, self.data as *mut c_void, self.bytes, &self.flat(), self.element()?)
  }

  /// A view of the first `rows` entries along axis 0 (all of them without `rows`), where the tensor lives.
  fn view(&self, ort: &'static Ort, rows: Option<i64>, name: &str) -> Result<Value, String> {
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
    ort.view_in(self.info, self.data as *mut c_void, count as usize * size, &dims, t)
  }
}

/// Where a bound output goes.
enum Out<'a> {
  /// Into this value's memory.
  Into(&'a Value),
  /// Into memory ORT allocates, described by this memory info (the host's or a device's).
  To(*const ort_sys::OrtMemoryInfo),
}

/// Runs `session` through an IoBinding of these inputs and outputs; returns the bound outputs' values, in order.
fn bind_run(ort: &'static Ort, session: &Session, inputs: &[(&str, &Value)], outputs: &[(&str, Out)]) -> Result<Vec<Value>, String> {
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
  for (name, value) in inputs {
    let name = cstring(name)?;
    check(api, unsafe { (api.BindInput)(binding.0, name.as_ptr(), value.ptr) })?;
  }
  for (name, out) in outputs {
    let name = cstring(name)?;
    match out {
      Out::Into(value) => check(api, unsafe { (api.BindOutput)(binding.0, name.as_ptr(), value.ptr) })?,
      Out::To(info) => check(api, unsafe { (api.BindOutputToDevice)(binding.0, name.as_ptr(), *info) })?,
    }
  }
  check(api, unsafe { (api.RunWithBinding)(session.ptr, no_options(), binding.0) }).map_err(|e| format!("run failed: {e}"))?;
  let mut values: *mut *mut OrtValue = null_mut();
  let mut count = 0usize;
  check(api, unsafe { (api.GetBoundOutputValues)(binding.0, ort.allocator, &mut values, &mut count) })?;
  let bound = (0..count).map(|i| ort.owned(unsafe { *values.add(i) })).collect();
  ort.free(values as *mut c_void);
  Ok(bound)
}

/// A device provider's memory: its allocator, and the one-node sessions that copy between it and the host
/// (Identity per element type: ORT's C API has no copy between devices for built-in providers) and that write an
/// output's slices into a kept tensor there (ScatterND, in place).
pub struct Device {
  ort: &'static Ort,
  pub info: *mut ort_sys::OrtMemoryInfo,
  allocator: *mut ort_sys::OrtAllocator,
  copies: HashMap<&'static str, Session>,
}

unsafe impl Send for Device {}
unsafe impl Sync for Device {}

impl Drop for Device {
  fn drop(&mut self) {
    unsafe { (self.ort.api.ReleaseAllocator)(self.allocator) };
    unsafe { (self.ort.api.ReleaseMemoryInfo)(self.info) };
  }
}

impl Device {
  /// `copies`: an Identity model per element type (engine/native-engine.ts makes them).
  pub fn new(ort: &'static Ort, config: &Config, copies: Vec<(String, Vec<u8>)>) -> Result<Device, String> {
    let api = ort.api;
    let provider = config.device.as_ref().ok_or("no device provider")?;
    let name = cstring(provider.memory_name())?;
    let mut info = null_mut();
    check(api, unsafe {
      (api.CreateMemoryInfo)(
        name.as_ptr(),
        ort_sys::OrtAllocatorType::OrtDeviceAllocator,
        provider.device_id(),
        ort_sys::OrtMemType::OrtMemTypeDefault,
        &mut info,
      )
    })?;
    let mut sessions = HashMap::new();
    for (dtype, bytes) in &copies {
      let (t, _) = element_type(dtype)?;
      sessions.insert(dtype_name(t)?, create_session(ort, config, SessionSource::Bytes(bytes))?);
    }
    let anchor = sessions.get("float32").ok_or("no float32 copy model")?;
    let mut allocator = null_mut();
    check(api, unsafe { (api.CreateAllocator)(anchor.ptr, info, &mut allocator) })
      .map_err(|e| format!("no allocator for {} memory: {e}", provider.memory_name()))?;
    Ok(Device { ort, info, allocator, copies: sessions })
  }

  fn copy_session(&self, dtype: &str) -> Result<&Session, String> {
    self.copies.get(dtype).ok_or_else(|| format!("no copy model for {dtype}"))
  }

  fn upload(&self, kept: &Kept, host: &[u8]) -> Result<(), String> {
    let source = self.ort.view(host.as_ptr() as *mut c_void, host.len(), &kept.flat(), kept.element()?)?;
    let target = kept.flat_view(self.ort)?;
    bind_run(self.ort, self.copy_session(kept.dtype)?, &[("x", &source)], &[("y", Out::Into(&target))])?;
    Ok(())
  }

  fn download(&self, kept: &Kept) -> Result<Vec<u8>, String> {
    let source = kept.flat_view(self.ort)?;
    let out = bind_run(self.ort, self.copy_session(kept.dtype)?, &[("x", &source)], &[("y", Out::To(self.ort.cpu))])?;
    let value = out.first().ok_or("the copy gave no output")?;
    let data = self.ort.data(value)?;
    Ok(unsafe { std::slice::from_raw_parts(data, kept.bytes) }.to_vec())
  }
}

/// Runs `session` on the feeds and kept feeds; returns the fetched outputs that are neither in place nor written.
#[allow(clippy::too_many_arguments)]
pub fn run(
  ort: &'static Ort,
  device: Option<&Device>,
  session: &Session,
  feeds: &[Feed],
  kept: &[KeptFeed],
  fetches: &[String],
  in_place: &HashMap<String, usize>,
  writes: &[Write],
) -> Result<Vec<Output>, String> {
  let mut inputs: Vec<(String, Value)> = Vec::new();
  for feed in feeds {
    let (t, _) = element_type(&feed.dtype)?;
    inputs.push((feed.name.clone(), ort.view(feed.data as *mut c_void, feed.bytes, &feed.dims, t)?));
  }
  for k in kept {
    inputs.push((k.name.clone(), k.tensor.view(ort, k.rows, &k.name)?));
  }
  let mut places: Vec<Option<Value>> = Vec::new();
  for output in fetches {
    places.push(match in_place.get(output) {
      Some(&k) => Some(kept[k].tensor.view(ort, kept[k].rows, &kept[k].name)?),
      None => None,
    });
  }
  let written = |name: &String| writes.iter().find(|w| &w.output == name);
  let outputs: Vec<(&str, Out)> = fetches
    .iter()
    .zip(places.iter())
    .map(|(name, place)| {
      let out = match (place, written(name), device) {
        (Some(value), _, _) => Out::Into(value),
        (None, Some(_), Some(d)) => Out::To(d.info),
        _ => Out::To(ort.cpu),
      };
      (name.as_str(), out)
    })
    .collect();
  let bound_inputs: Vec<(&str, &Value)> = inputs.iter().map(|(n, v)| (n.as_str(), v)).collect();
  let bound = bind_run(ort, session, &bound_inputs, &outputs)?;
  drop(outputs);
  drop(inputs);
  let mut result = Vec::new();
  for (name, value) in fetches.iter().zip(bound.iter()) {
    if in_place.contains_key(name) {
      continue;
    }
    let (t, dims) = ort.shape(value.ptr)?;
    let dtype = dtype_name(t)?;
    match (written(name), device) {
      (Some(write), Some(d)) => d.write(write, value, dtype, &dims)?,
      (write, _) => {
        // in host memory: an output bound to the CPU, or any output of a CPU engine
        let (_, size) = element_type(dtype)?;
        let bytes = dims.iter().product::<i64>() as usize * size;
        let source = unsafe { std::slice::from_raw_parts(ort.data(value)?, bytes) };
        match write {
          Some(write) => write_slices(source, dtype, &dims, write)?,
          None => result.push(Output { name: name.clone(), dtype, dims, data: source.to_vec() }),
        }
      }
    }
  }
  Ok(result)
}

fn shape(dims: &[i64]) -> String {
  format!("[{}]", dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(","))
}

/// The geometry of a write (outer, inner, span, room), checked: the messages are the JS engines' (engine/kept.ts).
fn check_write(dtype: &str, dims: &[i64], write: &Write) -> Result<(i64, i64, i64, i64), String> {
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
  let outer: i64 = target.dims[1..axis].iter().product();
  let inner: i64 = target.dims[axis + 1..].iter().product();
  let (span, room) = (dims[axis], target.dims[axis]);
  for &(from, row, at) in &write.slices {
    if !(from >= 0 && from < dims[0] && row >= 0 && row < target.dims[0]) {
      return Err(format!("{what}: slice {from} → row {row} is out of range"));
    }
    if !(at >= 0 && at + span <= room) {
      return Err(format!("{what}: {span} at {at} exceed the {room} along axis {axis}"));
    }
  }
  Ok((outer, inner, span, room))
}

/// Copies slices of an output into a kept tensor in host memory.
fn write_slices(source: &[u8], dtype: &str, dims: &[i64], write: &Write) -> Result<(), String> {
  let (outer, inner, span, room) = check_write(dtype, dims, write)?;
  let (_, size) = element_type(dtype)?;
  let chunk = (span * inner) as usize * size;
  for &(from, row, at) in &write.slices {
    for o in 0..outer {
      let s = ((from * outer + o) * span * inner) as usize * size;
      let d = (((row * outer + o) * room + at) * inner) as usize * size;
      unsafe { std::ptr::copy_nonoverlapping(source.as_ptr().add(s), write.tensor.data.add(d), chunk) };
    }
  }
  Ok(())
}

impl Device {
  /// Writes slices of an output (in device memory) into a kept tensor on the device, through the write graph the
  /// JS side registered for its element type, rank and axis: ScatterND of the gathered rows, in place.
  fn write(&self, write: &Write, output: &Value, dtype: &str, dims: &[i64]) -> Result<(), String> {
    let (outer, _, span, _) = check_write(dtype, dims, write)?;
    let graph = write.graph.as_ref().ok_or_else(|| format!("no write graph for output {}", write.output))?;
    let target = &write.tensor;
    let axis = write.axis;
    let froms: Vec<i64> = write.slices.iter().map(|s| s.0).collect();
    // one index row (row, o_1 .. o_{axis-1}, at + j) per slice, outer position and column
    let middle = &target.dims[1..axis];
    let mut indices: Vec<i64> = Vec::with_capacity(write.slices.len() * (outer * span) as usize * (axis + 1));
    for &(_, row, at) in &write.slices {
      for o in 0..outer {
        let mut rest = o;
        let mut position = vec![0i64; middle.len()];
        for (i, d) in middle.iter().enumerate().rev() {
          position[i] = rest % d;
          rest /= d;
        }
        for j in 0..span {
          indices.push(row);
          indices.extend_from_slice(&position);
          indices.push(at + j);
        }
      }
    }
    let t64 = ort_sys::ONNXTensorElementDataType::ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
    let froms_value = self.ort.view(froms.as_ptr() as *mut c_void, froms.len() * 8, &[froms.len() as i64], t64)?;
    let n = indices.len() as i64 / (axis as i64 + 1);
    let indices_value =
      self.ort.view(indices.as_ptr() as *mut c_void, indices.len() * 8, &[n, axis as i64 + 1], t64)?;
    let whole = target.view(self.ort, None, &write.name)?;
    bind_run(
      self.ort,
      graph,
      &[("target", &whole), ("source", output), ("froms", &froms_value), ("indices", &indices_value)],
      &[("out", Out::Into(&whole))],
    )?;
    Ok(())
  }
}

/// The engine's state: sessions by model id, kept sets by handle id.
#[derive(Default)]
pub struct State {
  pub sessions: HashMap<String, Arc<Session>>,
  /// Write graphs by key (device engines).
  pub write_graphs: HashMap<String, Arc<Session>>,
  pub kept: HashMap<u32, KeptSet>,
  pub next_kept: u32,
}

pub type Shared = Arc<Mutex<State>>;

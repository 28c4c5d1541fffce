//! The N-API face of the native engine (engine/native-engine.ts holds the JS side, which checks names and shapes
//! the way the other engines do and calls this with what passed). Model loads and runs go to the libuv thread pool
//! so that the caller's event loop stays free; keep, allocate, read and forget copy on the calling thread.

mod engine;
mod ort;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::{AsyncTask, Buffer};
use napi::{Env, Error, Result, Status, Task};
use napi_derive::napi;

use crate::engine::{Config, Device, Feed, KeptFeed, Output, Provider, Session, SessionSource, Shared, State, Write};
use crate::ort::Ort;

fn error(message: String) -> Error {
  Error::new(Status::GenericFailure, message)
}

#[napi(object)]
pub struct EngineOptions {
  /// The ONNX Runtime library to open (libonnxruntime.so.1 of onnxruntime-node, or the PyPI wheel's).
  pub library: String,
  pub threads: u32,
  /// disabled | basic | extended | all
  pub optimization: String,
  pub memory_arena: bool,
  /// The device provider before the CPU: none, "cuda" or "webgpu".
  pub device: Option<DeviceArg>,
  /// An Identity model per element type (dtype, ONNX bytes): the device's copies to and from the host.
  pub copy_models: Option<Vec<ModelArg>>,
}

#[napi(object)]
pub struct DeviceArg {
  pub name: String,
  pub device_id: Option<i32>,
  /// CUDA: TF32 for float32 MatMuls and convolutions (ORT's default: on).
  pub tf32: Option<bool>,
  /// CUDA: the provider's memory arena limit in bytes.
  pub memory_limit: Option<i64>,
}

#[napi(object)]
pub struct ModelArg {
  pub key: String,
  pub bytes: Buffer,
}

#[napi(object)]
pub struct TensorArg {
  pub name: String,
  pub dtype: String,
  pub dims: Vec<i64>,
  pub data: Buffer,
}

#[napi(object)]
pub struct ShapeArg {
  pub name: String,
  pub dtype: String,
  pub dims: Vec<i64>,
}

#[napi(object)]
pub struct KeptArg {
  pub id: u32,
  pub rows: Option<i64>,
}

#[napi(object)]
pub struct InPlaceArg {
  pub output: String,
  pub feed: String,
}

#[napi(object)]
pub struct WriteArg {
  /// The key of the write graph registered with registerWrite (device engines).
  pub graph: Option<String>,
  pub output: String,
  pub kept: u32,
  pub name: String,
  pub axis: u32,
  /// [from, row, at] each
  pub slices: Vec<Vec<i64>>,
}

#[napi(object)]
pub struct OutputTensor {
  pub name: String,
  pub dtype: String,
  pub dims: Vec<i64>,
  pub data: Buffer,
}

#[napi(object)]
pub struct Loaded {
  pub inputs: Vec<String>,
  pub outputs: Vec<String>,
}

fn tensor(out: Output) -> OutputTensor {
  OutputTensor { name: out.name, dtype: out.dtype.to_owned(), dims: out.dims, data: Buffer::from(out.data) }
}

#[napi]
pub struct NativeEngine {
  ort: &'static Ort,
  config: Arc<Config>,
  device: Option<Arc<Device>>,
  state: Shared,
}

#[napi]
impl NativeEngine {
  #[napi(constructor)]
  pub fn new(options: EngineOptions) -> Result<Self> {
    use ort_sys::GraphOptimizationLevel::*;
    let optimization = match options.optimization.as_str() {
      "disabled" => ORT_DISABLE_ALL,
      "basic" => ORT_ENABLE_BASIC,
      "extended" => ORT_ENABLE_EXTENDED,
      "all" => ORT_ENABLE_ALL,
      other => return Err(error(format!("unknown graph optimization level {other}"))),
    };
    let device = match options.device {
      None => None,
      Some(d) if d.name == "cuda" => Some(Provider::Cuda {
        device_id: d.device_id.unwrap_or(0),
        tf32: d.tf32.unwrap_or(true),
        memory_limit: d.memory_limit.map(|l| l as u64),
      }),
      Some(d) if d.name == "webgpu" => Some(Provider::WebGpu),
      Some(d) => return Err(error(format!("unknown device provider {}", d.name))),
    };
    let ort = ort::ort(&options.library).map_err(error)?;
    let config = Config { threads: options.threads as i32, optimization, memory_arena: options.memory_arena, device };
    let device = match &config.device {
      None => None,
      Some(_) => {
        let copies = options.copy_models.unwrap_or_default().into_iter().map(|m| (m.key, m.bytes.to_vec())).collect();
        Some(Arc::new(Device::new(ort, &config, copies).map_err(error)?))
      }
    };
    Ok(NativeEngine { ort, config: Arc::new(config), device, state: Arc::new(Mutex::new(State::default())) })
  }

  /// The ONNX Runtime version of the opened library.
  #[napi(getter)]
  pub fn version(&self) -> String {
    self.ort.version.clone()
  }

  #[napi(ts_return_type = "Promise<Loaded>")]
  pub fn load(&self, id: String, bytes: Option<Buffer>, path: Option<String>) -> AsyncTask<LoadTask> {
    AsyncTask::new(LoadTask {
      ort: self.ort,
      config: Arc::clone(&self.config),
      state: Arc::clone(&self.state),
      id,
      bytes,
      path,
      session: None,
    })
  }

  #[napi]
  pub fn release(&self, id: String) {
    self.state.lock().unwrap().sessions.remove(&id);
  }

  #[napi]
  pub fn keep(&self, tensors: Vec<TensorArg>) -> Result<u32> {
    let mut set = HashMap::new();
    for t in tensors {
      let kept = engine::keep(self.ort, self.device.as_deref(), &t.dtype, &t.dims, Some(&t.data)).map_err(error)?;
      set.insert(t.name, Arc::new(kept));
    }
    Ok(self.insert(set))
  }

  #[napi]
  pub fn allocate(&self, shapes: Vec<ShapeArg>) -> Result<u32> {
    let mut set = HashMap::new();
    for s in shapes {
      set.insert(s.name, Arc::new(engine::keep(self.ort, self.device.as_deref(), &s.dtype, &s.dims, None).map_err(error)?));
    }
    Ok(self.insert(set))
  }

  #[napi]
  pub fn read(&self, id: u32, names: Vec<String>) -> Result<Vec<OutputTensor>> {
    let state = self.state.lock().unwrap();
    let set = state.kept.get(&id).ok_or_else(|| error(not_here(id)))?;
    names
      .into_iter()
      .map(|name| {
        let t = set.get(&name).ok_or_else(|| error(format!("kept feeds {id} hold no tensor {name}")))?;
        let data = t.read(self.device.as_deref()).map_err(error)?;
        Ok(tensor(Output { name, dtype: t.dtype, dims: t.dims.clone(), data }))
      })
      .collect()
  }

  /// Registers the graph that writes slices into kept tensors of one element type, rank and axis on the device.
  #[napi]
  pub fn register_write(&self, key: String, bytes: Buffer) -> Result<()> {
    if self.state.lock().unwrap().write_graphs.contains_key(&key) {
      return Ok(());
    }
    let session = engine::create_session(self.ort, &self.config, SessionSource::Bytes(&bytes)).map_err(error)?;
    self.state.lock().unwrap().write_graphs.insert(key, Arc::new(session));
    Ok(())
  }

  /// Whether kept tensors live on a device.
  #[napi(getter)]
  pub fn on_device(&self) -> bool {
    self.device.is_some()
  }

  #[napi]
  pub fn forget(&self, id: u32) {
    self.state.lock().unwrap().kept.remove(&id);
  }

  #[napi(ts_return_type = "Promise<OutputTensor[]>")]
  pub fn run(
    &self,
    model: String,
    feeds: Vec<TensorArg>,
    kept: Vec<KeptArg>,
    fetches: Vec<String>,
    in_place: Vec<InPlaceArg>,
    writes: Vec<WriteArg>,
  ) -> Result<AsyncTask<RunTask>> {
    let state = self.state.lock().unwrap();
    let session = state
      .sessions
      .get(&model)
      .cloned()
      .ok_or_else(|| error(format!("model {} is not loaded in this engine", &model[..12.min(model.len())])))?;
    let mut kept_feeds: Vec<KeptFeed> = Vec::new();
    for k in &kept {
      let set = state.kept.get(&k.id).ok_or_else(|| error(not_here(k.id)))?;
      for (name, t) in set {
        kept_feeds.push(KeptFeed { name: name.clone(), tensor: Arc::clone(t), rows: k.rows });
      }
    }
    let mut places = HashMap::new();
    for p in in_place {
      let at = kept_feeds
        .iter()
        .position(|k| k.name == p.feed)
        .ok_or_else(|| error(format!("output {} in place of {}, not a kept feed", p.output, p.feed)))?;
      places.insert(p.output, at);
    }
    let mut outs = Vec::new();
    for w in writes {
      let set = state.kept.get(&w.kept).ok_or_else(|| error(not_here(w.kept)))?;
      let t = set.get(&w.name).ok_or_else(|| error(format!("kept feeds {} hold no tensor {}", w.kept, w.name)))?;
      let slices = w.slices.iter().map(|s| (s[0], s[1], s[2])).collect();
      let graph = match &w.graph {
        Some(key) => Some(Arc::clone(
          state.write_graphs.get(key).ok_or_else(|| error(format!("no write graph registered as {key}")))?,
        )),
        None => None,
      };
      outs.push(Write { graph, output: w.output, name: w.name, tensor: Arc::clone(t), axis: w.axis as usize, slices });
    }
    Ok(AsyncTask::new(RunTask {
      ort: self.ort,
      device: self.device.clone(),
      session,
      feeds,
      kept: kept_feeds,
      fetches,
      in_place: places,
      writes: outs,
    }))
  }

  #[napi]
  pub fn close(&self) {
    let mut state = self.state.lock().unwrap();
    state.sessions.clear();
    state.write_graphs.clear();
    state.kept.clear();
  }
}

impl NativeEngine {
  fn insert(&self, set: engine::KeptSet) -> u32 {
    let mut state = self.state.lock().unwrap();
    let id = state.next_kept;
    state.next_kept += 1;
    state.kept.insert(id, set);
    id
  }
}

fn not_here(id: u32) -> String {
  format!("kept feeds {id} are not in this engine (forgotten, or kept elsewhere)")
}

pub struct LoadTask {
  ort: &'static Ort,
  config: Arc<Config>,
  state: Shared,
  id: String,
  bytes: Option<Buffer>,
  path: Option<String>,
  session: Option<Arc<Session>>,
}

impl Task for LoadTask {
  type Output = Arc<Session>;
  type JsValue = Loaded;

  fn compute(&mut self) -> Result<Self::Output> {
    if let Some(s) = self.state.lock().unwrap().sessions.get(&self.id) {
      return Ok(Arc::clone(s));
    }
    let source = match (&self.bytes, &self.path) {
      (Some(b), _) => SessionSource::Bytes(b),
      (None, Some(p)) => SessionSource::Path(p),
      (None, None) => return Err(error("load: neither bytes nor a path".into())),
    };
    let session = Arc::new(engine::create_session(self.ort, &self.config, source).map_err(error)?);
    self.session = Some(Arc::clone(&session));
    Ok(session)
  }

  fn resolve(&mut self, _env: Env, session: Self::Output) -> Result<Self::JsValue> {
    let loaded = Loaded { inputs: session.inputs.clone(), outputs: session.outputs.clone() };
    self.state.lock().unwrap().sessions.entry(self.id.clone()).or_insert(session);
    Ok(loaded)
  }
}

pub struct RunTask {
  ort: &'static Ort,
  device: Option<Arc<Device>>,
  session: Arc<Session>,
  feeds: Vec<TensorArg>,
  kept: Vec<KeptFeed>,
  fetches: Vec<String>,
  in_place: HashMap<String, usize>,
  writes: Vec<Write>,
}

impl Task for RunTask {
  type Output = Vec<Output>;
  type JsValue = Vec<OutputTensor>;

  fn compute(&mut self) -> Result<Self::Output> {
    let feeds: Vec<Feed> = self
      .feeds
      .iter_mut()
      .map(|t| Feed {
        name: t.name.clone(),
        dtype: t.dtype.clone(),
        dims: t.dims.clone(),
        bytes: t.data.len(),
        data: t.data.as_mut_ptr(),
      })
      .collect();
    engine::run(self.ort, self.device.as_deref(), &self.session, &feeds, &self.kept, &self.fetches, &self.in_place, &self.writes)
      .map_err(error)
  }

  fn resolve(&mut self, _env: Env, outputs: Self::Output) -> Result<Self::JsValue> {
    Ok(outputs.into_iter().map(tensor).collect())
  }
}

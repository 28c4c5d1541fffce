//! ONNX Runtime's C API, opened at run time from a given library file, and the small safe pieces the engine uses:
//! statuses as `Result`, owned handles released on drop, tensor views over memory the engine owns.

use std::ffi::{CStr, CString, c_char, c_void};
use std::ptr::{null, null_mut};
use std::sync::OnceLock;

use ort_sys::{
  ONNXTensorElementDataType as ElementType, OrtAllocator, OrtApi, OrtApiBase, OrtEnv, OrtLoggingLevel,
  OrtMemoryInfo, OrtStatusPtr, OrtValue,
};

/// The C API version the crate's types describe (ORT 1.23); any later library serves it.
const API_VERSION: u32 = 23;

pub struct Ort {
  pub api: &'static OrtApi,
  pub env: *mut OrtEnv,
  /// CPU memory info (arena allocator, default memory): what host tensors are made with.
  pub cpu: *mut OrtMemoryInfo,
  /// ORT's default CPU allocator (64-byte aligned blocks).
  pub allocator: *mut OrtAllocator,
  pub version: String,
  pub library: String,
  _library: libloading::Library,
}

unsafe impl Send for Ort {}
unsafe impl Sync for Ort {}

static ORT: OnceLock<Result<Ort, String>> = OnceLock::new();

/// Opens the library once per process; later calls must name the same file.
pub fn ort(library: &str) -> Result<&'static Ort, String> {
  let opened = ORT.get_or_init(|| open(library)).as_ref().map_err(Clone::clone)?;
  if opened.library != library {
    return Err(format!("ONNX Runtime is already open from {} in this process, not {library}", opened.library));
  }
  Ok(opened)
}

fn open(library: &str) -> Result<Ort, String> {
  let lib = unsafe { libloading::Library::new(library) }.map_err(|e| format!("cannot open {library}: {e}"))?;
  let base: libloading::Symbol<unsafe extern "C" fn() -> *const OrtApiBase> =
    unsafe { lib.get(b"OrtGetApiBase") }.map_err(|e| format!("{library} has no OrtGetApiBase: {e}"))?;
  let base = unsafe { &*base() };
  let version = unsafe { CStr::from_ptr((base.GetVersionString)()) }.to_string_lossy().into_owned();
  let api = unsafe { (base.GetApi)(API_VERSION) };
  if api.is_null() {
    return Err(format!("{library} (ONNX Runtime {version}) does not serve C API version {API_VERSION}"));
  }
  let api: &'static OrtApi = unsafe { &*api };
  let mut env = null_mut();
  let id = CString::new("seedflow-native").unwrap();
  check(api, unsafe { (api.CreateEnv)(OrtLoggingLevel::ORT_LOGGING_LEVEL_ERROR, id.as_ptr(), &mut env) })?;
  let mut cpu = null_mut();
  check(api, unsafe {
    (api.CreateCpuMemoryInfo)(ort_sys::OrtAllocatorType::OrtArenaAllocator, ort_sys::OrtMemType::OrtMemTypeDefault, &mut cpu)
  })?;
  let mut allocator = null_mut();
  check(api, unsafe { (api.GetAllocatorWithDefaultOptions)(&mut allocator) })?;
  Ok(Ort { api, env, cpu, allocator, version, library: library.to_owned(), _library: lib })
}

/// A status as a Result, the status released.
pub fn check(api: &OrtApi, status: OrtStatusPtr) -> Result<(), String> {
  if status.0.is_null() {
    return Ok(());
  }
  let message = unsafe { CStr::from_ptr((api.GetErrorMessage)(status.0)) }.to_string_lossy().into_owned();
  unsafe { (api.ReleaseStatus)(status.0) };
  Err(message)
}

pub fn cstring(s: &str) -> Result<CString, String> {
  CString::new(s).map_err(|_| format!("{s:?} contains a NUL byte"))
}

/// The element types the engine speaks (engine/dtype.ts), with their sizes.
pub fn element_type(dtype: &str) -> Result<(ElementType, usize), String> {
  use ElementType::*;
  Ok(match dtype {
    "float32" => (ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, 4),
    "float16" => (ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, 2),
    "float64" => (ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE, 8),
    "int8" => (ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8, 1),
    "uint8" => (ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8, 1),
    "int32" => (ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, 4),
    "int64" => (ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64, 8),
    "bool" => (ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL, 1),
    other => return Err(format!("unsupported dtype {other}")),
  })
}

pub fn dtype_name(t: ElementType) -> Result<&'static str, String> {
  use ElementType::*;
  Ok(match t {
    ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT => "float32",
    ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16 => "float16",
    ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE => "float64",
    ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8 => "int8",
    ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8 => "uint8",
    ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32 => "int32",
    ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64 => "int64",
    ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL => "bool",
    other => return Err(format!("unsupported output element type {other:?}")),
  })
}

/// An OrtValue this code owns, released on drop.
pub struct Value {
  pub ptr: *mut OrtValue,
  api: &'static OrtApi,
}

unsafe impl Send for Value {}
unsafe impl Sync for Value {}

impl Drop for Value {
  fn drop(&mut self) {
    if !self.ptr.is_null() {
      unsafe { (self.api.ReleaseValue)(self.ptr) };
    }
  }
}

impl Ort {
  /// A tensor over `len` bytes at `data` (not owned: the memory must outlive the value), on the CPU.
  pub fn view(&self, data: *mut c_void, len: usize, dims: &[i64], t: ElementType) -> Result<Value, String> {
    self.view_in(self.cpu, data, len, dims, t)
  }

  /// A tensor over `len` bytes at `data` in the memory `info` describes (a device's, for device pointers).
  pub fn view_in(
    &self,
    info: *const OrtMemoryInfo,
    data: *mut c_void,
    len: usize,
    dims: &[i64],
    t: ElementType,
  ) -> Result<Value, String> {
    let mut out = null_mut();
    check(self.api, unsafe {
      (self.api.CreateTensorWithDataAsOrtValue)(info, data, len, dims.as_ptr(), dims.len(), t, &mut out)
    })?;
    Ok(Value { ptr: out, api: self.api })
  }

  /// An uninitialized tensor from `allocator` (ORT's CPU allocator gives 64-byte aligned blocks).
  pub fn allocate_with(&self, allocator: *mut OrtAllocator, dims: &[i64], t: ElementType) -> Result<Value, String> {
    let mut out = null_mut();
    check(self.api, unsafe { (self.api.CreateTensorAsOrtValue)(allocator, dims.as_ptr(), dims.len(), t, &mut out) })?;
    Ok(Value { ptr: out, api: self.api })
  }

  /// A zero-filled host tensor, and its data pointer.
  pub fn allocate(&self, dims: &[i64], t: ElementType, bytes: usize) -> Result<(Value, *mut u8), String> {
    let value = self.allocate_with(self.allocator, dims, t)?;
    let data = self.data(&value)?;
    unsafe { std::ptr::write_bytes(data, 0, bytes) };
    Ok((value, data))
  }

  pub fn data(&self, value: &Value) -> Result<*mut u8, String> {
    let mut data: *mut c_void = null_mut();
    check(self.api, unsafe { (self.api.GetTensorMutableData)(value.ptr, &mut data) })?;
    Ok(data as *mut u8)
  }

  /// An output value's element type and dims.
  pub fn shape(&self, value: *mut OrtValue) -> Result<(ElementType, Vec<i64>), String> {
    let mut info = null_mut();
    check(self.api, unsafe { (self.api.GetTensorTypeAndShape)(value, &mut info) })?;
    let result = (|| {
      let mut t = ElementType::ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
      check(self.api, unsafe { (self.api.GetTensorElementType)(info, &mut t) })?;
      let mut rank = 0usize;
      check(self.api, unsafe { (self.api.GetDimensionsCount)(info, &mut rank) })?;
      let mut dims = vec![0i64; rank];
      check(self.api, unsafe { (self.api.GetDimensions)(info, dims.as_mut_ptr(), rank) })?;
      Ok((t, dims))
    })();
    unsafe { (self.api.ReleaseTensorTypeAndShapeInfo)(info) };
    result
  }

  pub fn owned(&self, ptr: *mut OrtValue) -> Value {
    Value { ptr, api: self.api }
  }

  /// Frees what ORT's default allocator gave (names, arrays of outputs).
  pub fn free(&self, p: *mut c_void) {
    if !p.is_null() {
      let _ = check(self.api, unsafe { (self.api.AllocatorFree)(self.allocator, p) });
    }
  }

  pub fn string(&self, p: *mut c_char) -> String {
    let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    self.free(p as *mut c_void);
    s
  }
}

pub fn no_options() -> *const ort_sys::OrtRunOptions {
  null()
}

//! Finding and loading the ONNX Runtime shared library, once per process.
//! The library comes from the PyPI wheel `onnxruntime` (installed by `make setup`), not the build.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::EmbedError;

/// ONNX Runtime's own variable for the library path, honoured first.
pub const RUNTIME_PATH_ENV_VAR: &str = "ORT_DYLIB_PATH";
/// Where `make setup` puts the library, relative to the workspace root (or the image's /app).
pub const DEFAULT_RUNTIME_SUBPATH: &str = ".cache/onnxruntime/libonnxruntime.so.1.31.1";
/// How to get the library, for every error that finds it missing or unusable.
pub const RUNTIME_INSTALL_HINT: &str = "run `make setup` (it copies libonnxruntime.so.1.31.1 from the PyPI wheel `onnxruntime==1.31.1` into .cache/onnxruntime) or set ORT_DYLIB_PATH to an ONNX Runtime 1.31 shared library";

/// `$ORT_DYLIB_PATH` when set, else `<workspace_root>/.cache/onnxruntime/libonnxruntime.so.1.31.1`.
pub fn resolve_runtime_library(workspace_root: &Path) -> PathBuf {
    match std::env::var_os(RUNTIME_PATH_ENV_VAR) {
        Some(configured_path) if !configured_path.is_empty() => PathBuf::from(configured_path),
        _ => workspace_root.join(DEFAULT_RUNTIME_SUBPATH),
    }
}

/// The library that was loaded, or why it could not be: ONNX Runtime allows one library and one
/// environment per process, so the first load decides for every model loaded afterwards.
static LOADED_RUNTIME: OnceLock<Result<ort::environment::Environment, String>> = OnceLock::new();

/// Loads the library at `library_path` (the first call in a process wins) and creates the
/// process's ONNX Runtime environment, which every session is built in.
pub(crate) fn load_runtime(
    library_path: &Path,
) -> Result<&'static ort::environment::Environment, EmbedError> {
    let outcome = LOADED_RUNTIME.get_or_init(|| {
        if !library_path.is_file() {
            return Err(format!(
                "the ONNX Runtime library {} does not exist; {RUNTIME_INSTALL_HINT}",
                library_path.display()
            ));
        }
        let environment = ort::init_from(library_path).map_err(|load_error| {
            format!("cannot load ONNX Runtime: {load_error}; {RUNTIME_INSTALL_HINT}")
        })?;
        let environment = environment
            .with_name("engram")
            .with_telemetry(false)
            .build()
            .map_err(|environment_error| {
                format!(
                    "ONNX Runtime from {} could not start: {environment_error}",
                    library_path.display()
                )
            })?;
        tracing::info!(library = %library_path.display(), "onnx runtime loaded");
        Ok(environment)
    });
    match outcome {
        Ok(environment) => Ok(environment),
        Err(message) => Err(EmbedError::ModelMissing(message.clone())),
    }
}

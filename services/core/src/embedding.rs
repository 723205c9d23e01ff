//! Where a project's vectors come from: the deployment's model, the built-in local model,
//! the deployment's OpenAI-compatible provider, or vectors the client sends itself.

use crate::FieldError;

/// Longest vector a project may declare for client vectors (OpenAI's largest model has
/// 3,072 dimensions).
pub const MAX_CLIENT_VECTOR_DIMENSION: u32 = 4_096;

/// A project's embedding space. Vectors of different spaces are never compared: each space
/// has its own index, and a project can change space only while it holds no memories.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ProjectEmbedding {
    /// Whatever model the deployment embeds with by default.
    #[default]
    Deployment,
    /// The built-in all-MiniLM-L6-v2 model (English), run in process.
    Local,
    /// The built-in multilingual-e5-small model (Chinese, English and about 100 other
    /// languages in one space), run in process: `{"source": "local", "model": "multilingual"}`.
    LocalMultilingual,
    /// The deployment's OpenAI-compatible embedding provider (`ENGRAM_EMBEDDING_*`).
    Provider,
    /// The client sends a vector of this length with every memory and every query;
    /// Engram embeds nothing for the project.
    ClientVectors { dimension: u32 },
}

impl ProjectEmbedding {
    /// The `source` name of the API.
    pub const fn source(self) -> &'static str {
        match self {
            ProjectEmbedding::Deployment => "deployment",
            ProjectEmbedding::Local | ProjectEmbedding::LocalMultilingual => "local",
            ProjectEmbedding::Provider => "provider",
            ProjectEmbedding::ClientVectors { .. } => "client",
        }
    }

    /// The local model picked, by its API name (`minilm`, `multilingual`).
    pub const fn local_model(self) -> Option<&'static str> {
        match self {
            ProjectEmbedding::Local => Some("minilm"),
            ProjectEmbedding::LocalMultilingual => Some("multilingual"),
            _ => None,
        }
    }

    /// The database's `embedding_source`: the API's source, but each local model by its name
    /// (no column to add for the model).
    pub const fn stored_source(self) -> &'static str {
        match self {
            ProjectEmbedding::LocalMultilingual => "local-multilingual",
            other => other.source(),
        }
    }

    /// The declared dimension of client vectors.
    pub const fn client_dimension(self) -> Option<u32> {
        match self {
            ProjectEmbedding::ClientVectors { dimension } => Some(dimension),
            _ => None,
        }
    }

    /// From the API's `{source, model, dimension}`; errors name `field.source`,
    /// `field.model` / `field.dimension`. `model` goes with `local` only: `minilm` (the
    /// default) or `multilingual`.
    pub fn parse(
        source: &str,
        model: Option<&str>,
        dimension: Option<i64>,
        field: &str,
    ) -> Result<Self, FieldError> {
        let no_dimension = |embedding: ProjectEmbedding| match dimension {
            None => Ok(embedding),
            Some(_) => Err(FieldError::new(
                format!("{field}.dimension"),
                "only a project with source \"client\" declares a dimension",
            )),
        };
        let no_model = |embedding: ProjectEmbedding| match model {
            None => Ok(embedding),
            Some(model) => Err(model_without_local(model, field)),
        };
        match source {
            "deployment" => no_dimension(ProjectEmbedding::Deployment).and_then(no_model),
            "local" => match model {
                None | Some("minilm") => no_dimension(ProjectEmbedding::Local),
                Some("multilingual") => no_dimension(ProjectEmbedding::LocalMultilingual),
                Some(other) => Err(FieldError::new(
                    format!("{field}.model"),
                    format!(
                        "must be \"minilm\" (English, the default) or \"multilingual\"; got {other:?}"
                    ),
                )),
            },
            "provider" => no_dimension(ProjectEmbedding::Provider).and_then(no_model),
            "client" if let Some(model) = model => Err(model_without_local(model, field)),
            "client" => match dimension {
                Some(dimension)
                    if (1..=i64::from(MAX_CLIENT_VECTOR_DIMENSION)).contains(&dimension) =>
                {
                    Ok(ProjectEmbedding::ClientVectors {
                        dimension: dimension as u32,
                    })
                }
                Some(dimension) => Err(FieldError::new(
                    format!("{field}.dimension"),
                    format!("must be 1–{MAX_CLIENT_VECTOR_DIMENSION}, got {dimension}"),
                )),
                None => Err(FieldError::new(
                    format!("{field}.dimension"),
                    "required with source \"client\": the length of the vectors you will send",
                )),
            },
            other => Err(FieldError::new(
                format!("{field}.source"),
                format!("must be one of deployment, local, provider, client; got {other:?}"),
            )),
        }
    }

    /// From the database's columns; unknown text reads as the deployment default.
    pub fn from_columns(source: &str, dimension: Option<i32>) -> Self {
        match (source, dimension) {
            ("local", _) => ProjectEmbedding::Local,
            ("local-multilingual", _) => ProjectEmbedding::LocalMultilingual,
            ("provider", _) => ProjectEmbedding::Provider,
            ("client", Some(dimension)) if dimension > 0 => ProjectEmbedding::ClientVectors {
                dimension: dimension as u32,
            },
            _ => ProjectEmbedding::Deployment,
        }
    }
}

fn model_without_local(model: &str, field: &str) -> FieldError {
    FieldError::new(
        format!("{field}.model"),
        format!("only source \"local\" picks a model (the others bring their own); got {model:?}"),
    )
}

/// The model id of the multilingual model (`engram_embed::MULTILINGUAL_MODEL_ID`), whose
/// cosines [`comparable_similarity`] rescales.
pub const MULTILINGUAL_E5_MODEL_ID: &str = "multilingual-e5-small";

/// Where unrelated texts' cosines sit for multilingual-e5-small (measured: 0.81–0.85 for
/// unrelated short facts, against about 0 for all-MiniLM-L6-v2).
const MULTILINGUAL_E5_UNRELATED_COSINE: f32 = 0.8;

/// A cosine between two vectors of `model_id` on the scale the similarity thresholds were
/// set on (all-MiniLM-L6-v2's, where unrelated texts sit near 0): the thresholds that
/// merge, drop or hide a near-duplicate read this, never a raw cosine. multilingual-e5-small
/// packs everything near its top — "用户住在上海。" / "用户住在北京。" is 0.977, "two cats" /
/// "three cats" 0.951, a paraphrase 0.96–0.99 — so its cosine `c` reads as
/// `(c − 0.8) / 0.2`: a value changed then reads 0.76–0.89, below every duplicate threshold
/// (0.95, 0.97), and only a near-verbatim restatement (≥ 0.99) above them. Other models
/// (and client vectors) read as they are.
pub fn comparable_similarity(model_id: &str, cosine: f32) -> f32 {
    if model_id == MULTILINGUAL_E5_MODEL_ID {
        ((cosine - MULTILINGUAL_E5_UNRELATED_COSINE) / (1.0 - MULTILINGUAL_E5_UNRELATED_COSINE))
            .clamp(-1.0, 1.0)
    } else {
        cosine
    }
}

/// The model id stored with memories of a client-vector project, and the name of its index.
pub fn client_vectors_model_id(dimension: u32) -> String {
    format!("client-vectors-{dimension}")
}

/// Checks one client vector: the declared length, finite numbers, not all zero (a zero
/// vector has no direction to compare). `field` names it in the error.
pub fn check_client_vector(vector: &[f32], dimension: u32, field: &str) -> Result<(), FieldError> {
    if vector.len() != dimension as usize {
        return Err(FieldError::new(
            field,
            format!(
                "must hold {dimension} numbers (the project's declared dimension), got {}",
                vector.len()
            ),
        ));
    }
    if let Some(position) = vector.iter().position(|value| !value.is_finite()) {
        return Err(FieldError::new(
            format!("{field}[{position}]"),
            "must be a finite number",
        ));
    }
    if vector.iter().all(|value| *value == 0.0) {
        return Err(FieldError::new(field, "must not be all zeros"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_vectors_need_a_dimension_in_range() {
        assert_eq!(
            ProjectEmbedding::parse("client", None, Some(8), "embedding"),
            Ok(ProjectEmbedding::ClientVectors { dimension: 8 })
        );
        let missing = ProjectEmbedding::parse("client", None, None, "embedding").unwrap_err();
        assert_eq!(missing.field, "embedding.dimension");
        let too_long =
            ProjectEmbedding::parse("client", None, Some(4_097), "embedding").unwrap_err();
        assert!(too_long.message.contains("1–4096"), "{}", too_long.message);
        let stray = ProjectEmbedding::parse("local", None, Some(8), "embedding").unwrap_err();
        assert_eq!(stray.field, "embedding.dimension");
        let unknown = ProjectEmbedding::parse("openai", None, None, "embedding").unwrap_err();
        assert_eq!(unknown.field, "embedding.source");
    }

    #[test]
    fn multilingual_cosines_read_on_the_thresholds_scale() {
        // Measured e5 cosines: a changed value must not read as a duplicate (0.95).
        assert!(comparable_similarity("multilingual-e5-small", 0.977) < 0.95);
        assert!(comparable_similarity("multilingual-e5-small", 0.951) < 0.95);
        assert!(comparable_similarity("multilingual-e5-small", 0.994) >= 0.95);
        assert!(comparable_similarity("multilingual-e5-small", 0.81) < 0.55);
        assert_eq!(comparable_similarity("all-MiniLM-L6-v2", 0.96), 0.96);
    }

    #[test]
    fn a_local_project_picks_its_model() {
        assert_eq!(
            ProjectEmbedding::parse("local", Some("multilingual"), None, "embedding"),
            Ok(ProjectEmbedding::LocalMultilingual)
        );
        assert_eq!(
            ProjectEmbedding::parse("local", Some("minilm"), None, "embedding"),
            Ok(ProjectEmbedding::Local)
        );
        let unknown =
            ProjectEmbedding::parse("local", Some("bge-m3"), None, "embedding").unwrap_err();
        assert_eq!(unknown.field, "embedding.model");
        let not_local =
            ProjectEmbedding::parse("provider", Some("multilingual"), None, "embedding")
                .unwrap_err();
        assert_eq!(not_local.field, "embedding.model");
    }

    #[test]
    fn columns_round_trip() {
        for embedding in [
            ProjectEmbedding::Deployment,
            ProjectEmbedding::Local,
            ProjectEmbedding::LocalMultilingual,
            ProjectEmbedding::Provider,
            ProjectEmbedding::ClientVectors { dimension: 768 },
        ] {
            let dimension = embedding
                .client_dimension()
                .map(|dimension| dimension as i32);
            assert_eq!(
                ProjectEmbedding::from_columns(embedding.stored_source(), dimension),
                embedding
            );
        }
    }

    #[test]
    fn client_vectors_are_checked() {
        assert!(check_client_vector(&[0.1, 0.2], 2, "embedding").is_ok());
        let short = check_client_vector(&[0.1], 2, "embedding").unwrap_err();
        assert!(short.message.contains("got 1"), "{}", short.message);
        let not_finite = check_client_vector(&[0.1, f32::NAN], 2, "embedding").unwrap_err();
        assert_eq!(not_finite.field, "embedding[1]");
        let zero = check_client_vector(&[0.0, 0.0], 2, "embedding").unwrap_err();
        assert!(zero.message.contains("zeros"));
    }
}

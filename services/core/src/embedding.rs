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
    /// The built-in all-MiniLM-L6-v2 model, run in process.
    Local,
    /// The deployment's OpenAI-compatible embedding provider (`ENGRAM_EMBEDDING_*`).
    Provider,
    /// The client sends a vector of this length with every memory and every query;
    /// Engram embeds nothing for the project.
    ClientVectors { dimension: u32 },
}

impl ProjectEmbedding {
    /// The `source` name of the API and the database.
    pub const fn source(self) -> &'static str {
        match self {
            ProjectEmbedding::Deployment => "deployment",
            ProjectEmbedding::Local => "local",
            ProjectEmbedding::Provider => "provider",
            ProjectEmbedding::ClientVectors { .. } => "client",
        }
    }

    /// The declared dimension of client vectors.
    pub const fn client_dimension(self) -> Option<u32> {
        match self {
            ProjectEmbedding::ClientVectors { dimension } => Some(dimension),
            _ => None,
        }
    }

    /// From the API's `{source, dimension}`; errors name `field.source` / `field.dimension`.
    pub fn parse(source: &str, dimension: Option<i64>, field: &str) -> Result<Self, FieldError> {
        let no_dimension = |embedding: ProjectEmbedding| match dimension {
            None => Ok(embedding),
            Some(_) => Err(FieldError::new(
                format!("{field}.dimension"),
                "only a project with source \"client\" declares a dimension",
            )),
        };
        match source {
            "deployment" => no_dimension(ProjectEmbedding::Deployment),
            "local" => no_dimension(ProjectEmbedding::Local),
            "provider" => no_dimension(ProjectEmbedding::Provider),
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
            ("provider", _) => ProjectEmbedding::Provider,
            ("client", Some(dimension)) if dimension > 0 => ProjectEmbedding::ClientVectors {
                dimension: dimension as u32,
            },
            _ => ProjectEmbedding::Deployment,
        }
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
            ProjectEmbedding::parse("client", Some(8), "embedding"),
            Ok(ProjectEmbedding::ClientVectors { dimension: 8 })
        );
        let missing = ProjectEmbedding::parse("client", None, "embedding").unwrap_err();
        assert_eq!(missing.field, "embedding.dimension");
        let too_long = ProjectEmbedding::parse("client", Some(4_097), "embedding").unwrap_err();
        assert!(too_long.message.contains("1–4096"), "{}", too_long.message);
        let stray = ProjectEmbedding::parse("local", Some(8), "embedding").unwrap_err();
        assert_eq!(stray.field, "embedding.dimension");
        let unknown = ProjectEmbedding::parse("openai", None, "embedding").unwrap_err();
        assert_eq!(unknown.field, "embedding.source");
    }

    #[test]
    fn columns_round_trip() {
        for embedding in [
            ProjectEmbedding::Deployment,
            ProjectEmbedding::Local,
            ProjectEmbedding::Provider,
            ProjectEmbedding::ClientVectors { dimension: 768 },
        ] {
            let dimension = embedding
                .client_dimension()
                .map(|dimension| dimension as i32);
            assert_eq!(
                ProjectEmbedding::from_columns(embedding.source(), dimension),
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

//! The deployment files, checked without helm or docker (neither runs here): the Helm chart's
//! templates parse, use only values that exist and are documented, and set only variables the
//! binary reads; the compose file has the whole topology and every file it mounts; the
//! Dockerfile is multi-stage and non-root. `helm lint helm/engram` checks more where helm is.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use yaml_rust2::{Yaml, YamlLoader};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(relative: &str) -> String {
    let path = workspace_root().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

fn chart_templates() -> Vec<(String, String)> {
    let directory = workspace_root().join("helm/engram/templates");
    let mut templates: Vec<(String, String)> = std::fs::read_dir(&directory)
        .unwrap()
        .flatten()
        .map(|entry| {
            let name = entry.file_name().to_string_lossy().to_string();
            let text = std::fs::read_to_string(entry.path()).unwrap();
            (name, text)
        })
        .collect();
    templates.sort();
    templates
}

/// The `{{ … }}` actions of a template, in order.
fn template_actions(text: &str) -> Vec<String> {
    let mut actions = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .unwrap_or_else(|| panic!("an action opened with {{{{ is never closed: {after:.60}"));
        actions.push(
            after[..end]
                .trim_matches(|c: char| c == '-' || c.is_whitespace())
                .to_string(),
        );
        rest = &after[end + 2..];
    }
    assert!(!rest.contains("}}"), "a stray }}}} without an opening {{{{");
    actions
}

/// Every `.Values.a.b` path a text refers to.
fn values_references(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (position, _) in text.match_indices(".Values.") {
        let path: String = text[position + ".Values.".len()..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '.')
            .collect();
        found.insert(path.trim_end_matches('.').to_string());
    }
    found
}

/// Dotted paths of every key in values.yaml (maps only; lists and scalars are leaves).
fn value_paths(node: &Yaml, prefix: &str, paths: &mut BTreeMap<String, bool>) {
    if let Yaml::Hash(map) = node {
        for (key, child) in map {
            let key = key.as_str().expect("values keys are strings");
            let path = if prefix.is_empty() {
                key.to_string()
            } else {
                format!("{prefix}.{key}")
            };
            let is_map = matches!(child, Yaml::Hash(_));
            paths.insert(path.clone(), is_map);
            value_paths(child, &path, paths);
        }
    }
}

/// For each key path in values.yaml, whether a `#` comment sits right above its line.
fn documented_value_paths(text: &str) -> BTreeMap<String, bool> {
    let mut documented = BTreeMap::new();
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut previous_line_is_comment = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.is_empty() {
            previous_line_is_comment = false;
            continue;
        }
        if trimmed.starts_with('#') {
            previous_line_is_comment = true;
            continue;
        }
        let indent = line.len() - trimmed.len();
        let is_key = !trimmed.starts_with('-')
            && trimmed
                .split_once(':')
                .is_some_and(|(key, _)| key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
        if is_key {
            let key = trimmed
                .split_once(':')
                .map(|(key, _)| key)
                .unwrap_or_default();
            while stack.last().is_some_and(|(level, _)| *level >= indent) {
                stack.pop();
            }
            let path = stack
                .iter()
                .map(|(_, key)| key.as_str())
                .chain(std::iter::once(key))
                .collect::<Vec<_>>()
                .join(".");
            documented.insert(path.clone(), previous_line_is_comment);
            stack.push((indent, key.to_string()));
        }
        previous_line_is_comment = false;
    }
    documented
}

/// `ENGRAM_*` and `QDRANT_*` variables the binary reads (its clap `env = "…"` attributes and
/// direct `std::env::var` reads), plus the OpenTelemetry SDK's endpoint variable.
pub(crate) fn variables_the_binary_reads() -> BTreeSet<String> {
    let mut known = BTreeSet::from(["OTEL_EXPORTER_OTLP_ENDPOINT".to_string()]);
    for relative in ["services/cli/src", "services/embed/src"] {
        for entry in std::fs::read_dir(workspace_root().join(relative))
            .unwrap()
            .flatten()
        {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            for marker in ["env = \"", "env::var(\"", "try_from_env(\""] {
                for (position, _) in text.match_indices(marker) {
                    let name: String = text[position + marker.len()..]
                        .chars()
                        .take_while(|c| *c != '"')
                        .collect();
                    known.insert(name);
                }
            }
        }
    }
    known
}

#[test]
fn chart_metadata_declares_the_optional_qdrant_subchart() {
    let chart = &YamlLoader::load_from_str(&read("helm/engram/Chart.yaml")).unwrap()[0];
    assert_eq!(chart["apiVersion"].as_str(), Some("v2"));
    assert_eq!(chart["name"].as_str(), Some("engram"));
    let dependencies = chart["dependencies"].as_vec().expect("dependencies");
    let qdrant = dependencies
        .iter()
        .find(|dependency| dependency["name"].as_str() == Some("qdrant"))
        .expect("the Qdrant subchart");
    assert_eq!(qdrant["condition"].as_str(), Some("qdrant.enabled"));
    let values = &YamlLoader::load_from_str(&read("helm/engram/values.yaml")).unwrap()[0];
    assert_eq!(
        values["qdrant"]["enabled"].as_bool(),
        Some(false),
        "the subchart is off unless asked for"
    );
}

#[test]
fn chart_templates_parse_and_use_only_documented_values() {
    let values_text = read("helm/engram/values.yaml");
    let values = &YamlLoader::load_from_str(&values_text).unwrap()[0];
    let mut paths = BTreeMap::new();
    value_paths(values, "", &mut paths);
    let documented = documented_value_paths(&values_text);
    let templates = chart_templates();

    let mut defined_helpers = BTreeSet::new();
    for (_, text) in &templates {
        for action in template_actions(text) {
            if let Some(name) = action.strip_prefix("define ") {
                defined_helpers.insert(name.trim().trim_matches('"').to_string());
            }
        }
    }

    let mut referenced = BTreeSet::new();
    for (name, text) in &templates {
        let mut open_blocks: Vec<String> = Vec::new();
        for action in template_actions(text) {
            let keyword = action.split_whitespace().next().unwrap_or_default();
            match keyword {
                "if" | "range" | "with" | "define" => open_blocks.push(action.clone()),
                "end" => {
                    open_blocks
                        .pop()
                        .unwrap_or_else(|| panic!("{name}: `end` without an open block"));
                }
                _ => {}
            }
            for (position, _) in action.match_indices("include \"") {
                let helper: String = action[position + "include \"".len()..]
                    .chars()
                    .take_while(|c| *c != '"')
                    .collect();
                assert!(
                    defined_helpers.contains(&helper),
                    "{name}: includes undefined helper {helper:?}"
                );
            }
        }
        assert!(
            open_blocks.is_empty(),
            "{name}: blocks never closed: {open_blocks:?}"
        );
        referenced.extend(values_references(text));
    }
    referenced.extend(values_references(&read("helm/engram/Chart.yaml")));
    referenced.insert("qdrant.enabled".to_string()); // Chart.yaml's dependency condition
    referenced.insert("qdrant.image.tag".to_string()); // read by the Qdrant subchart

    for path in &referenced {
        assert!(
            paths.contains_key(path),
            "a template uses .Values.{path}, which values.yaml does not define"
        );
        let documented_here_or_above = path
            .match_indices('.')
            .map(|(position, _)| &path[..position])
            .chain(std::iter::once(path.as_str()))
            .any(|prefix| documented.get(prefix).copied().unwrap_or(false));
        assert!(
            documented_here_or_above,
            ".Values.{path} has no comment in values.yaml"
        );
    }
    // Nothing in values.yaml is dead: every leaf is used (itself or through a parent that a
    // template renders whole, such as `resources` with toYaml).
    for (path, is_map) in &paths {
        if *is_map {
            continue;
        }
        let used = referenced
            .iter()
            .any(|reference| path == reference || path.starts_with(&format!("{reference}.")));
        assert!(used, "values.yaml defines {path}, which no template uses");
    }
}

#[test]
fn chart_has_every_resource_of_a_production_deployment() {
    let templates = chart_templates();
    let all_text: String = templates.iter().map(|(_, text)| text.as_str()).collect();
    for kind in [
        "kind: Deployment",
        "kind: Service",
        "kind: Ingress",
        "kind: HorizontalPodAutoscaler",
        "kind: PodDisruptionBudget",
        "kind: ConfigMap",
        "kind: Secret",
        "kind: Job",
        "kind: ServiceAccount",
    ] {
        assert!(all_text.contains(kind), "the chart has no {kind}");
    }
    for (name, role) in [
        ("deployment-gateway.yaml", "gateway"),
        ("deployment-worker.yaml", "worker"),
    ] {
        let text = &templates
            .iter()
            .find(|(file, _)| file == name)
            .unwrap_or_else(|| panic!("{name} missing"))
            .1;
        assert!(
            text.contains(&format!("args: [\"{role}\"]")),
            "{name} runs {role}"
        );
        for probe in ["startupProbe:", "livenessProbe:", "readinessProbe:"] {
            assert!(text.contains(probe), "{name} has no {probe}");
        }
        assert!(
            text.contains("checksum/config:") && text.contains("sha256sum"),
            "{name}: config changes must roll the pods"
        );
        assert!(
            text.contains(".Values.securityContext"),
            "{name}: container security context"
        );
        assert!(
            text.contains(".Values.podSecurityContext"),
            "{name}: pod security context"
        );
    }
    let job = &templates
        .iter()
        .find(|(file, _)| file == "job-migrate.yaml")
        .unwrap()
        .1;
    assert!(job.contains("\"helm.sh/hook\": pre-install,pre-upgrade"));
    assert!(job.contains("args: [\"migrate\"]"));

    let values = &YamlLoader::load_from_str(&read("helm/engram/values.yaml")).unwrap()[0];
    assert_eq!(
        values["podSecurityContext"]["runAsNonRoot"].as_bool(),
        Some(true)
    );
    assert_eq!(
        values["securityContext"]["readOnlyRootFilesystem"].as_bool(),
        Some(true)
    );
    assert_eq!(
        values["securityContext"]["allowPrivilegeEscalation"].as_bool(),
        Some(false)
    );
}

#[test]
fn chart_and_compose_set_only_variables_the_binary_reads() {
    let known = variables_the_binary_reads();
    let configmap = read("helm/engram/templates/configmap.yaml");
    let secret = read("helm/engram/templates/secret.yaml");
    let compose = read("infra/compose.yaml");
    let mut checked = 0;
    for (source, text) in [
        ("configmap", &configmap),
        ("secret", &secret),
        ("compose", &compose),
    ] {
        for line in text.lines() {
            let trimmed = line.trim_start();
            let Some((name, _)) = trimmed.split_once(':') else {
                continue;
            };
            let name = name.trim();
            // QDRANT__… (double underscore) configures the Qdrant server itself.
            let is_engram_variable = !name.starts_with("QDRANT__")
                && (name.starts_with("ENGRAM_")
                    || name.starts_with("QDRANT_")
                    || name.starts_with("OTEL_"))
                && name
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            if is_engram_variable {
                assert!(
                    known.contains(name),
                    "{source} sets {name}, which the engram binary does not read"
                );
                checked += 1;
            }
        }
    }
    assert!(
        checked > 25,
        "only {checked} variables found: the check lost its input"
    );
    // And the ones a cluster needs are there.
    for required in ["ENGRAM_SERVER_SECRET", "ENGRAM_DATABASE_URL"] {
        assert!(
            secret.contains(required),
            "the chart's Secret lacks {required}"
        );
    }
    assert!(configmap.contains("QDRANT_URL:"));
}

#[test]
fn compose_runs_the_whole_cluster_topology() {
    let compose_text = read("infra/compose.yaml");
    let compose = &YamlLoader::load_from_str(&compose_text).unwrap()[0];
    let services = compose["services"].as_hash().expect("services");
    let names: BTreeSet<&str> = services.keys().filter_map(Yaml::as_str).collect();
    for wanted in [
        "postgres",
        "qdrant-1",
        "qdrant-2",
        "qdrant-3",
        "migrate",
        "gateway-1",
        "gateway-2",
        "worker",
        "otel-collector",
        "prometheus",
        "grafana",
    ] {
        assert!(names.contains(wanted), "compose has no {wanted} service");
    }
    let command = |service: &str| -> Vec<String> {
        compose["services"][service]["command"]
            .as_vec()
            .map(|parts| {
                parts
                    .iter()
                    .filter_map(|part| part.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(
        command("gateway-1").first().map(String::as_str),
        Some("gateway")
    );
    assert_eq!(
        command("gateway-2").first().map(String::as_str),
        Some("gateway")
    );
    assert_eq!(
        command("worker").first().map(String::as_str),
        Some("worker")
    );
    assert_eq!(
        command("migrate").first().map(String::as_str),
        Some("migrate")
    );
    // The Qdrant nodes form one cluster: two join the first.
    for node in ["qdrant-2", "qdrant-3"] {
        assert!(
            command(node).iter().any(|part| part == "--bootstrap"),
            "{node} joins qdrant-1"
        );
    }
    // Every file the stack mounts exists in the repository.
    let mut mounted = 0;
    for service in services.values() {
        for volume in service["volumes"].as_vec().into_iter().flatten() {
            let Some(spec) = volume.as_str() else {
                continue;
            };
            if let Some(local) = spec.strip_prefix("./") {
                let local = local.split(':').next().unwrap_or_default();
                assert!(
                    workspace_root().join("infra").join(local).exists(),
                    "compose mounts infra/{local}, which does not exist"
                );
                mounted += 1;
            }
        }
    }
    assert!(
        mounted >= 4,
        "collector, prometheus and grafana configs are mounted"
    );
}

#[test]
fn dockerfile_is_multi_stage_and_runs_as_non_root() {
    let dockerfile = read("infra/Dockerfile");
    let stages = dockerfile
        .lines()
        .filter(|line| line.starts_with("FROM "))
        .count();
    assert!(stages >= 2, "a build stage and a runtime stage");
    let user_line = dockerfile
        .lines()
        .find(|line| line.starts_with("USER "))
        .expect("a USER instruction");
    assert!(
        !user_line.contains("root") && !user_line.contains(" 0"),
        "{user_line}"
    );
    assert!(dockerfile.contains("engram-cli --bin engram"));
    assert!(
        dockerfile.contains("ENGRAM_MODEL_DIR="),
        "the image carries the model"
    );
    assert!(
        dockerfile.contains("ORT_DYLIB_PATH=") && dockerfile.contains("libonnxruntime.so.1.31.1"),
        "the image carries ONNX Runtime and says where it is"
    );
}

/// Behind an ingress every caller shares the controller's address unless Engram trusts its
/// X-Forwarded-For: the chart documents `config.trustedProxies` beside the ingress setting and
/// warns after an install that enables the ingress without it.
#[test]
fn the_ingress_setting_points_at_trusted_proxies() {
    let values = read("helm/engram/values.yaml");
    let ingress = values
        .split_once("\ningress:\n")
        .map(|(_, rest)| rest.split("\n\n").next().unwrap_or(""))
        .unwrap_or("");
    assert!(
        ingress.contains("config.trustedProxies"),
        "the ingress section names config.trustedProxies: {ingress}"
    );
    let notes = read("helm/engram/templates/NOTES.txt");
    assert!(
        notes.contains(".Values.ingress.enabled")
            && notes.contains(".Values.config.trustedProxies"),
        "NOTES.txt warns about an ingress without trusted proxies"
    );
}

/// A compose service's key, following the `<<: *engram` merge (yaml_rust2 resolves the alias
/// but not the merge).
fn compose_key<'yaml>(service: &'yaml Yaml, key: &str) -> &'yaml Yaml {
    let own = &service[key];
    if own.is_badvalue() {
        &service["<<"][key]
    } else {
        own
    }
}

/// Where the processes keep what they append to: every process that writes audit events or
/// erasures (both gateways and the worker; `migrate` too, so a future bootstrap event cannot
/// land elsewhere) names the same anchor and ledger, on one named volume each mounts
/// writable; the read-only root filesystem holds neither. The image owns the mount points,
/// so a fresh named volume there (and `/bootstrap`) is writable by its user.
#[test]
fn compose_gives_every_appender_the_same_writable_anchor_and_ledger() {
    let compose = &YamlLoader::load_from_str(&read("infra/compose.yaml")).unwrap()[0];
    let mut anchors = BTreeSet::new();
    let mut ledgers = BTreeSet::new();
    for name in ["gateway-1", "gateway-2", "worker", "migrate"] {
        let service = &compose["services"][name];
        let environment = compose_key(service, "environment");
        let anchor = environment["ENGRAM_AUDIT_ANCHOR"]
            .as_str()
            .unwrap_or_else(|| panic!("{name} names no ENGRAM_AUDIT_ANCHOR"));
        let ledger = environment["ENGRAM_ERASURE_LEDGER"]
            .as_str()
            .unwrap_or_else(|| panic!("{name} names no ENGRAM_ERASURE_LEDGER"));
        let volumes: Vec<&str> = compose_key(service, "volumes")
            .as_vec()
            .into_iter()
            .flatten()
            .filter_map(Yaml::as_str)
            .collect();
        for file in [anchor, ledger] {
            let mount = volumes
                .iter()
                .filter_map(|spec| {
                    let mut parts = spec.split(':');
                    Some((parts.next()?, parts.next()?, parts.next()))
                })
                .find(|(_, target, _)| file.starts_with(&format!("{target}/")));
            let (volume, _, mode) =
                mount.unwrap_or_else(|| panic!("{name}: {file} is on no mounted volume"));
            assert!(
                !volume.starts_with('.') && !volume.starts_with('/'),
                "{name}: {file} is on a named volume, not a host path"
            );
            assert_ne!(mode, Some("ro"), "{name}: {file} is on a read-only mount");
            assert!(
                !compose["volumes"][volume].is_badvalue(),
                "{name}: volume {volume} is declared"
            );
        }
        anchors.insert(anchor.to_string());
        ledgers.insert(ledger.to_string());
    }
    assert_eq!(
        anchors.len(),
        1,
        "one anchor for every process: {anchors:?}"
    );
    assert_eq!(
        ledgers.len(),
        1,
        "one erasure ledger for every process: {ledgers:?}"
    );
    let dockerfile = read("infra/Dockerfile");
    let anchor_dir = anchors
        .iter()
        .next()
        .and_then(|anchor| anchor.rsplit_once('/'))
        .map(|(directory, _)| directory.to_string())
        .unwrap_or_default();
    assert!(
        dockerfile.contains(&format!("-o 10001 -g 10001 {anchor_dir} /bootstrap")),
        "the image owns {anchor_dir} by its user, so a fresh named volume there is writable"
    );
}

/// `MINIMUM_QDRANT_VERSION`, read from the line the index states it on.
fn minimum_qdrant_version() -> (u64, u64, u64) {
    let source = read("services/index/src/remote.rs");
    let line = source
        .lines()
        .find(|line| line.starts_with("pub const MINIMUM_QDRANT_VERSION"))
        .expect("the index states its minimum Qdrant version");
    let stated = line.split('"').nth(1).unwrap_or_default();
    assert_eq!(stated, engram_index::MINIMUM_QDRANT_VERSION);
    version_triple(stated).unwrap_or_else(|| panic!("{stated} is a version"))
}

fn version_triple(text: &str) -> Option<(u64, u64, u64)> {
    let mut parts = text.trim_start_matches('v').split('.');
    Some((
        parts.next()?.parse().ok()?,
        parts.next()?.parse().ok()?,
        parts.next().unwrap_or("0").parse().ok()?,
    ))
}

#[test]
fn every_qdrant_the_files_deploy_meets_the_codes_minimum() {
    let minimum = minimum_qdrant_version();
    let compose = &YamlLoader::load_from_str(&read("infra/compose.yaml")).unwrap()[0];
    let mut images = 0;
    for (name, service) in compose["services"].as_hash().expect("services") {
        let Some(image) = service["image"].as_str() else {
            continue;
        };
        let Some(tag) = image.strip_prefix("qdrant/qdrant:") else {
            continue;
        };
        images += 1;
        let version = version_triple(tag).unwrap_or_else(|| panic!("{name:?}: {tag} is a version"));
        assert!(
            version >= minimum,
            "{name:?} runs Qdrant {tag}, older than the code's minimum {minimum:?}"
        );
    }
    assert_eq!(images, 3, "the three Qdrant nodes of compose");
    let values = &YamlLoader::load_from_str(&read("helm/engram/values.yaml")).unwrap()[0];
    let tag = values["qdrant"]["image"]["tag"]
        .as_str()
        .expect("the chart pins the Qdrant subchart's image");
    assert!(
        version_triple(tag).is_some_and(|version| version >= minimum),
        "the chart's Qdrant {tag} is older than the code's minimum {minimum:?}"
    );
}

/// Engram exports over OTLP/HTTP, whose port is 4318 (4317 is gRPC): the endpoints the
/// deployment files set or suggest use the HTTP port, and the collector listens on it.
#[test]
fn the_otlp_endpoints_use_the_port_of_the_exporters_protocol() {
    let telemetry = read("services/cli/src/telemetry.rs");
    assert!(
        telemetry.contains(".with_http()"),
        "the exporter speaks OTLP/HTTP; if it changes protocol, change the ports below"
    );
    let compose = &YamlLoader::load_from_str(&read("infra/compose.yaml")).unwrap()[0];
    let endpoint = compose["x-engram"]["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"]
        .as_str()
        .expect("compose exports traces");
    assert!(
        endpoint.ends_with(":4318"),
        "compose sends OTLP/HTTP to {endpoint}"
    );
    let collector = &YamlLoader::load_from_str(&read("infra/otel/collector.yaml")).unwrap()[0];
    assert_eq!(
        collector["receivers"]["otlp"]["protocols"]["http"]["endpoint"].as_str(),
        Some("0.0.0.0:4318"),
        "the collector receives OTLP/HTTP on 4318"
    );
    let values = read("helm/engram/values.yaml");
    let documented = values
        .lines()
        .skip_while(|line| !line.contains("OTLP"))
        .take_while(|line| !line.trim_start().starts_with("otlpEndpoint"))
        .collect::<String>();
    assert!(
        documented.contains(":4318") && !documented.contains(":4317"),
        "values.yaml suggests the HTTP port: {documented}"
    );
}

/// With the chart's defaults (two gateways and a worker) every pod that appends audit events
/// or erasures mounts one ReadWriteMany claim, which the chart creates unless told to use an
/// existing one, and the configuration points the anchor and the ledger into it.
#[test]
fn the_charts_defaults_share_one_anchor_and_ledger_across_pods() {
    let templates = chart_templates();
    let template = |name: &str| {
        templates
            .iter()
            .find(|(file, _)| file == name)
            .unwrap_or_else(|| panic!("{name} missing"))
            .1
            .clone()
    };
    let claim = template("pvc-shared-state.yaml");
    assert!(claim.contains("kind: PersistentVolumeClaim"));
    assert!(claim.contains("ReadWriteMany"));
    assert!(
        claim.contains("required \"sharedState.storageClassName"),
        "the chart asks for a class that serves ReadWriteMany rather than leave pods Pending"
    );
    assert!(
        claim.contains("\n{{- if not .Values.sharedState.existingClaim }}"),
        "the claim is created by default"
    );
    assert!(
        claim.starts_with("{{- if .Values.config.auditAnchorClaim }}\n{{- fail "),
        "a release that set the old anchor claim is stopped, not moved to an empty volume"
    );
    assert!(
        claim.contains("\"helm.sh/resource-policy\": keep"),
        "uninstalling keeps the anchor and the ledger"
    );
    let values = &YamlLoader::load_from_str(&read("helm/engram/values.yaml")).unwrap()[0];
    assert_eq!(values["sharedState"]["existingClaim"].as_str(), Some(""));
    assert!(values["gateway"]["replicas"].as_i64() > Some(1));

    let configmap = template("configmap.yaml");
    let setting = |name: &str| {
        configmap
            .lines()
            .find_map(|line| line.trim().strip_prefix(&format!("{name}: ")))
            .unwrap_or_else(|| panic!("the ConfigMap sets {name} unconditionally"))
            .to_string()
    };
    for file in [
        setting("ENGRAM_AUDIT_ANCHOR"),
        setting("ENGRAM_ERASURE_LEDGER"),
    ] {
        assert!(
            file.starts_with("/var/lib/engram/shared/"),
            "{file} is on the shared claim"
        );
    }
    for name in ["deployment-gateway.yaml", "deployment-worker.yaml"] {
        let deployment = template(name);
        assert!(
            deployment
                .contains("- name: shared-state\n              mountPath: /var/lib/engram/shared"),
            "{name} mounts the shared claim where the anchor and ledger are"
        );
        assert!(
            deployment.contains("claimName: {{ include \"engram.sharedStateClaim\" . }}"),
            "{name} mounts the shared claim, with no condition around it"
        );
        let mount = deployment.find("- name: shared-state").unwrap_or_default();
        assert!(
            !deployment[..mount].trim_end().ends_with("{{- end }}")
                && !deployment[..mount].contains("{{- if .Values.sharedState"),
            "{name}: the mount has no condition"
        );
    }
}

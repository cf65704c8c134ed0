//! Experiment configurations: a round trip, and errors that name the file, the line,
//! the field, the gene and its alleles.

use super::*;

pub(super) fn write_config(text: &str) -> Result<ExperimentConfig, ConfigError> {
    ExperimentConfig::from_toml_str(text, Path::new("exp/experiment.toml"))
}

pub(super) const GOOD: &str = r#"name = "t"
strategy = "evolutionary"
seed = 1
backend = "replay:somewhere"

[budget]
evaluations = 50

[evolutionary]
population = 8
elites = 2
"#;

#[test]
fn experiment_config_round_trips() {
    let c = write_config(GOOD).unwrap();
    assert_eq!(c.budget(), Budget::Evaluations(50));
    assert_eq!(c.backend(), Backend::Replay("somewhere".into()));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("experiment.toml");
    c.save(&path).unwrap();
    assert_eq!(ExperimentConfig::load(&path).unwrap(), c);
}

#[test]
fn bad_experiment_config_names_file_line_and_field() {
    let unknown = write_config(&GOOD.replace("elites = 2", "elites = 2\nmutation = 0.3"))
        .unwrap_err()
        .to_string();
    assert!(unknown.starts_with("exp/experiment.toml:12:"), "{unknown}");
    assert!(unknown.contains("unknown field `mutation`"), "{unknown}");
    let wrong_type = write_config(&GOOD.replace("seed = 1", "seed = \"one\""))
        .unwrap_err()
        .to_string();
    assert!(
        wrong_type.starts_with("exp/experiment.toml:3:"),
        "{wrong_type}"
    );
    let elites = write_config(&GOOD.replace("elites = 2", "elites = 8"))
        .unwrap_err()
        .to_string();
    assert_eq!(elites, "exp/experiment.toml:11: field `evolutionary.elites`: elites = 8 must be below population = 8");
    let backend = write_config(&GOOD.replace("replay:somewhere", "tpu"))
        .unwrap_err()
        .to_string();
    assert!(
        backend.starts_with("exp/experiment.toml:4: field `backend`"),
        "{backend}"
    );
    let both = write_config(&GOOD.replace("evaluations = 50", "evaluations = 50\nminutes = 3"))
        .unwrap_err()
        .to_string();
    assert!(both.contains("field `budget`: give exactly one"), "{both}");
    let strategy = write_config(&GOOD.replace("\"evolutionary\"", "\"annealing\""))
        .unwrap_err()
        .to_string();
    assert!(
        strategy.starts_with("exp/experiment.toml:2:") && strategy.contains("annealing"),
        "{strategy}"
    );
}

#[test]
fn sub_space_errors_name_gene_and_alleles() {
    let sub = |genes: &str| {
        let text = format!(
            "[base]\n{}\n[genes]\n{genes}\n",
            toml::to_string(&Genome::baseline()).unwrap()
        );
        let s: SubSpace = toml::from_str(&text).unwrap();
        SearchSpace::sub(&s, HeadDim::D64, Target::Sm90)
            .err()
            .map(|e| e.to_string())
    };
    assert_eq!(sub("warps = [2, 4]"), None);
    assert!(sub("wraps = [2]")
        .unwrap()
        .contains("`wraps` is not a gene"));
    let bad = sub("block_m = [48]").unwrap();
    assert!(
        bad.contains("`48` is not an allele of block_m; expected one of 16, 32, 64, 128"),
        "{bad}"
    );
    assert!(sub("exp = []").unwrap().contains("lists no allele"));
    assert!(sub("kv_load = [\"direct\", \"direct\"]")
        .unwrap()
        .contains("twice"));
}

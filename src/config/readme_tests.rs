//! The README documents every flag with its environment variable, and upstream's names.

use super::{Config, upstream};

#[test]
fn the_readme_documents_every_flag_with_its_environment_variable() {
    use clap::CommandFactory;
    let readme = include_str!("../../README.md");
    for arg in Config::command().get_arguments() {
        let (Some(long), Some(env)) = (arg.get_long(), arg.get_env()) else { continue };
        let row = format!("| `--{long}` | `{}` |", env.to_string_lossy());
        assert!(readme.contains(&row), "the README's configuration table lacks `{row}`");
    }
    for alias in upstream::ALIASES {
        let row = format!("| `{}` | `--{}` |", alias.upstream, alias.flag.replace('_', "-"));
        assert!(readme.contains(&row), "the README's table of upstream's names lacks `{row}`");
    }
}

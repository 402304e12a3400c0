//! Reading the `[database]` table from a configuration file, with the file's own rule for
//! relative paths.

use docstore::config::DatabaseConfig;
use docstore::{Error, Result};
use serde::Deserialize;
use std::path::Path;

/// The `[database]` table of the TOML file at `path`, whatever else the file holds (an app's
/// own settings beside it), with a relative `sqlite.path` taken from the file's folder
/// ([`DatabaseConfig::resolve_relative_paths`]), as the command line's `--config FILE`
/// reads it: the file names the same database wherever the program runs. Paths in code, URLs
/// ([`parse_url`](crate::parse_url)) and the environment stay relative to the working
/// directory.
///
/// A file that cannot be read, is not TOML, has no `[database]` table or holds a setting
/// that is not one is [`Error::InvalidArgument`] naming the file and what is wrong.
///
/// ```
/// # let folder = tempfile::tempdir().unwrap();
/// # let file = folder.path().join("app.toml");
/// std::fs::write(&file, "listen = \"127.0.0.1:8080\"\n\
///                        [database]\nbackend = \"sqlite\"\n\
///                        [database.sqlite]\npath = \"app.db\"\n")?;
/// let database = docstore_any::load_config(&file)?;
/// assert_eq!(database.sqlite.unwrap().path, folder.path().join("app.db"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn load_config(path: impl AsRef<Path>) -> Result<DatabaseConfig> {
    let path = path.as_ref();
    let invalid = |why: &dyn std::fmt::Display| {
        Error::invalid(format!("config file {}: {why}", path.display()))
    };
    let text = std::fs::read_to_string(path).map_err(|err| invalid(&err))?;
    let mut file: toml::Table = toml::from_str(&text).map_err(|err| invalid(&err))?;
    let Some(table) = file.remove("database") else {
        return Err(invalid(&"no [database] table"));
    };
    let mut database = DatabaseConfig::deserialize(table).map_err(|err| invalid(&err))?;
    database.resolve_relative_paths(path);
    Ok(database)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(folder: &Path, text: &str) -> std::path::PathBuf {
        let file = folder.join("app.toml");
        std::fs::write(&file, text).unwrap();
        file
    }

    fn refusal(path: &Path) -> String {
        match load_config(path) {
            Err(Error::InvalidArgument(message)) => message,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_relative_path_is_taken_from_the_file_folder() {
        let folder = tempfile::tempdir().unwrap();
        let file = written(
            folder.path(),
            "[server]\nport = 1\n[database]\nbackend = \"sqlite\"\n\
             [database.sqlite]\npath = \"data/app.db\"\nbusy_timeout_ms = 7\n",
        );
        let database = load_config(&file).unwrap();
        let sqlite = database.sqlite.unwrap();
        assert_eq!(sqlite.path, folder.path().join("data/app.db"));
        assert_eq!(sqlite.busy_timeout_ms, 7);
        // A URL's path is the working directory's, as any path given in code.
        let url = crate::parse_url("sqlite:data/app.db").unwrap();
        assert_eq!(url.sqlite.unwrap().path, Path::new("data/app.db"));
    }

    #[test]
    fn a_bad_file_is_refused_naming_it() {
        let folder = tempfile::tempdir().unwrap();
        let missing = folder.path().join("missing.toml");
        assert!(refusal(&missing).contains("missing.toml"));
        let file = written(folder.path(), "[server]\nport = 1\n");
        assert!(refusal(&file).contains("no [database] table"));
        let file = written(folder.path(), "[database]\nbackend = \"mongo\"\n");
        assert!(refusal(&file).contains("mongo"));
        let file = written(folder.path(), "[database\n");
        assert!(refusal(&file).contains("app.toml"));
    }
}

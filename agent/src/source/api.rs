//! The API server source. SCAFFOLD.

use std::path::PathBuf;

use crate::checkpoint::Checkpoints;
use crate::source::EventStream;

#[derive(Debug, thiserror::Error)]
pub enum Error {}

#[derive(Debug, Clone)]
pub struct Config {
    pub kubeconfig: PathBuf,
    pub node_name: String,
    pub checkpoints: Checkpoints,
}

#[derive(Debug)]
pub struct ApiSource {}

impl ApiSource {
    pub async fn new(_config: Config) -> Result<ApiSource, Error> {
        todo!()
    }

    pub fn into_stream(self) -> EventStream {
        todo!()
    }
}

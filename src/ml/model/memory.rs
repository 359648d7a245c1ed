//! What a backend needs per device: weights per layer, cache per layer and
//! compute graph — Ollama's `ml.BackendMemory`, sized from what ggml would
//! allocate (buffer-type allocation sizes rounded to the buffer alignment),
//! so a caller can decide whether a model fits before allocating it.

/// One device's share. Layer vectors have `blocks + 1` entries: the
/// repeating layers, then the output layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceMemory {
    /// ggml registry index of the device.
    pub device: usize,
    pub name: String,
    pub weights: Vec<u64>,
    pub cache: Vec<u64>,
    pub graph: u64,
}

impl DeviceMemory {
    pub fn total(&self) -> u64 {
        self.weights.iter().sum::<u64>() + self.cache.iter().sum::<u64>() + self.graph
    }
}

/// The whole report: CPU first, then every GPU in registry order (used or
/// not, so callers can see where there is room).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Memory {
    /// Input weights (token embeddings …), always in CPU memory.
    pub input_weights: u64,
    pub devices: Vec<DeviceMemory>,
}

impl Memory {
    pub fn new(devices: &[(usize, String)], layers: usize) -> Memory {
        Memory {
            input_weights: 0,
            devices: devices
                .iter()
                .map(|(d, name)| DeviceMemory {
                    device: *d,
                    name: name.clone(),
                    weights: vec![0; layers],
                    cache: vec![0; layers],
                    graph: 0,
                })
                .collect(),
        }
    }

    /// The entry of registry device `device` (devices the report does not
    /// list, such as accelerators, count as the CPU, the first entry).
    pub fn device_mut(&mut self, device: usize) -> &mut DeviceMemory {
        let i = self.devices.iter().position(|d| d.device == device).unwrap_or(0);
        &mut self.devices[i]
    }

    pub fn add_weights(&mut self, device: usize, layer: Option<usize>, bytes: u64) {
        match layer {
            None => self.input_weights += bytes,
            Some(l) => {
                let d = self.device_mut(device);
                if let Some(w) = d.weights.get_mut(l) {
                    *w += bytes;
                }
            }
        }
    }

    pub fn add_cache(&mut self, device: usize, layer: usize, bytes: u64) {
        let d = self.device_mut(device);
        if let Some(c) = d.cache.get_mut(layer) {
            *c += bytes;
        }
    }

    /// Records a measured compute buffer; compute buffers only grow, so the
    /// report keeps the largest graph seen.
    pub fn set_graph(&mut self, device: usize, bytes: u64) {
        let d = self.device_mut(device);
        d.graph = d.graph.max(bytes);
    }

    pub fn total(&self) -> u64 {
        self.input_weights + self.devices.iter().map(|d| d.total()).sum::<u64>()
    }
}

impl std::fmt::Display for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "input weights {} B", self.input_weights)?;
        for d in &self.devices {
            let (w, c) = (d.weights.iter().sum::<u64>(), d.cache.iter().sum::<u64>());
            if w + c + d.graph > 0 {
                write!(f, "; {}: weights {w} B, cache {c} B, graph {} B", d.name, d.graph)?;
            }
        }
        Ok(())
    }
}

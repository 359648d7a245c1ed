//! Where each weight of a model goes, decided from its name alone (the
//! rules of Ollama's engine, see docs/notes/model-loading.md):
//!
//! 1. token/position embeddings (`token_embd`, `position_embd`,
//!    `token_norm_embd`, `token_types` as a name part) stay on the CPU and
//!    count as input weights. A model without an `output.*` tensor gets a
//!    second copy of `token_embd.weight` named `output.weight` on the output
//!    layer (tied embeddings).
//! 2. output-side tensors (`output`, `output_norm`, `cls`, `altup_proj`,
//!    `altup_unembd_proj`, `per_layer_token_embd`, `per_layer_model_proj`,
//!    `per_layer_proj_norm`) go to the output layer (index `blocks`).
//!    LFM2's output norm, `token_embd_norm` (llama.cpp's name for it,
//!    elsewhere BERT's embedding norm), goes there too in `lfm2` files,
//!    as llama.cpp places it.
//!    Gemma 3n's per-layer inputs are placed as llama.cpp places them in
//!    `gemma3n` files: `per_layer_token_embd` with the token embeddings
//!    (input), `per_layer_model_proj` and `per_layer_proj_norm` with layer
//!    0 (where ggml's scheduler then runs their ops, so that a model split
//!    between devices computes as llama.cpp's does).
//! 3. vision, projector and audio towers (`v.`, `mm.`, `s.` prefixes) go to
//!    the output layer too.
//! 4. `rope_freqs`, `rope_factors_long`, `rope_factors_short` are copied into
//!    every repeating layer as `blk.<i>.<name>`.
//! 5. anything else goes to the layer named by the first run of digits in
//!    its name (`blk.7.attn_q.weight` → 7); a name without digits stays on
//!    the CPU as an input weight.

use crate::ml::{Error, Result};

/// Which layer a weight belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// CPU-resident, accounted as input weights (never moves to a GPU).
    Input,
    /// Repeating layer `i` (0..blocks) or the output layer (`blocks`).
    Layer(usize),
}

/// One tensor to create for a weight of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub name: String,
    pub slot: Slot,
}

fn has_part(name: &str, parts: &[&str]) -> bool {
    name.split('.').any(|p| parts.contains(&p))
}

/// The first maximal run of ASCII digits in `name`, as a number
/// (`u64::MAX` when it does not fit, which no model has that many layers).
fn first_number(name: &str) -> Option<u64> {
    let start = name.find(|c: char| c.is_ascii_digit())?;
    let digits: String = name[start..].chars().take_while(|c| c.is_ascii_digit()).collect();
    Some(digits.parse().unwrap_or(u64::MAX))
}

/// Whether any tensor belongs to an `output` group (first name part).
pub fn has_output_group<'a>(names: impl IntoIterator<Item = &'a str>) -> bool {
    names.into_iter().any(|n| n.split('.').next() == Some("output"))
}

/// The tensors to create for the file tensor `name`, in a model of
/// architecture `arch` with `blocks` repeating layers.
pub fn targets(name: &str, blocks: usize, has_output: bool, arch: &str) -> Result<Vec<Target>> {
    let t = |name: String, slot| Target { name, slot };
    if matches!(arch, "lfm2" | "lfm2moe") && has_part(name, &["token_embd_norm"]) {
        return Ok(vec![t(name.to_string(), Slot::Layer(blocks))]);
    }
    if arch == "gemma3n" && blocks > 0 {
        if has_part(name, &["per_layer_token_embd"]) {
            return Ok(vec![t(name.to_string(), Slot::Input)]);
        }
        if has_part(name, &["per_layer_model_proj", "per_layer_proj_norm"]) {
            return Ok(vec![t(name.to_string(), Slot::Layer(0))]);
        }
    }
    if has_part(name, &["position_embd", "token_embd", "token_norm_embd", "token_types"]) {
        let mut v = vec![t(name.to_string(), Slot::Input)];
        if !has_output && name == "token_embd.weight" {
            v.push(t("output.weight".into(), Slot::Layer(blocks)));
        }
        return Ok(v);
    }
    if has_part(
        name,
        &[
            "cls",
            "output",
            "output_norm",
            "altup_proj",
            "altup_unembd_proj",
            "per_layer_token_embd",
            "per_layer_model_proj",
            "per_layer_proj_norm",
        ],
    ) || name.starts_with("v.")
        || name.starts_with("mm.")
        || name.starts_with("s.")
    {
        return Ok(vec![t(name.to_string(), Slot::Layer(blocks))]);
    }
    if has_part(name, &["rope_freqs", "rope_factors_long", "rope_factors_short"]) {
        return Ok((0..blocks).map(|i| t(format!("blk.{i}.{name}"), Slot::Layer(i))).collect());
    }
    match first_number(name) {
        Some(i) if i < blocks as u64 => Ok(vec![t(name.to_string(), Slot::Layer(i as usize))]),
        Some(i) => Err(Error::new(
            crate::ml::ErrorKind::Format,
            format!("tensor {name}: layer {i} is out of range for a model with {blocks} layers"),
        )),
        None => Ok(vec![t(name.to_string(), Slot::Input)]),
    }
}

/// Whether a layer tensor is a matrix that matmuls read (and so may be
/// repacked for them): a `.weight` that is not a norm, an embedding, a
/// convolution kernel or a per-head vector (`ssm_a`, `ssm_dt`, `ssm_d`,
/// `attn_sinks`). Biases are added, never multiplied.
pub fn is_matmul_weight(name: &str) -> bool {
    let Some(base) = name.strip_suffix(".weight") else {
        return false;
    };
    let last = base.rsplit('.').next().unwrap_or(base);
    !(last.ends_with("norm")
        || last.contains("embd")
        || last.contains("embed")
        || last.starts_with("ssm_conv")
        || matches!(last, "ssm_a" | "ssm_d" | "ssm_dt" | "attn_sinks" | "rope_freqs" | "token_types"))
}

/// True for mixture-of-experts expert weights (`ffn_up_exps`,
/// `ffn_gate_exps`, `ffn_down_exps`, `ffn_gate_up_exps`, and their biases
/// and scales), which the CPU-experts option keeps in host memory.
pub fn is_expert_tensor(name: &str) -> bool {
    name.split('.').any(|p| p.starts_with("ffn_") && p.ends_with("_exps"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(name: &str, blocks: usize, has_output: bool) -> Vec<(String, Slot)> {
        targets(name, blocks, has_output, "llama").unwrap().into_iter().map(|t| (t.name, t.slot)).collect()
    }

    #[test]
    fn lfm2_output_norm_is_output_side() {
        let lfm2 = targets("token_embd_norm.weight", 4, false, "lfm2").unwrap();
        assert_eq!(lfm2, vec![Target { name: "token_embd_norm.weight".into(), slot: Slot::Layer(4) }]);
        // BERT's embedding norm of the same name stays an input weight.
        assert_eq!(slots("token_embd_norm.weight", 4, true), vec![("token_embd_norm.weight".into(), Slot::Input)]);
        // Gemma 3n's per-layer inputs: as llama.cpp in gemma3n files, as
        // Ollama's engine (the output layer) under any other name.
        let g = |name: &str| targets(name, 4, true, "gemma3n").unwrap()[0].slot;
        assert_eq!(g("per_layer_token_embd.weight"), Slot::Input);
        assert_eq!(g("per_layer_model_proj.weight"), Slot::Layer(0));
        assert_eq!(g("per_layer_proj_norm.weight"), Slot::Layer(0));
        assert_eq!(g("altup_proj.weight"), Slot::Layer(4));
        assert_eq!(slots("per_layer_model_proj.weight", 4, true), vec![("per_layer_model_proj.weight".into(), Slot::Layer(4))]);
    }

    #[test]
    fn rules_in_order() {
        assert_eq!(slots("token_embd.weight", 4, true), vec![("token_embd.weight".into(), Slot::Input)]);
        assert_eq!(
            slots("token_embd.weight", 4, false),
            vec![("token_embd.weight".into(), Slot::Input), ("output.weight".into(), Slot::Layer(4))]
        );
        assert_eq!(slots("v.position_embd.weight", 4, true), vec![("v.position_embd.weight".into(), Slot::Input)]);
        assert_eq!(slots("output_norm.weight", 4, true), vec![("output_norm.weight".into(), Slot::Layer(4))]);
        assert_eq!(slots("output.weight", 4, true), vec![("output.weight".into(), Slot::Layer(4))]);
        assert_eq!(slots("v.blk.3.attn_q.weight", 4, true), vec![("v.blk.3.attn_q.weight".into(), Slot::Layer(4))]);
        assert_eq!(slots("mm.0.weight", 4, true), vec![("mm.0.weight".into(), Slot::Layer(4))]);
        assert_eq!(
            slots("rope_freqs.weight", 2, true),
            vec![("blk.0.rope_freqs.weight".into(), Slot::Layer(0)), ("blk.1.rope_freqs.weight".into(), Slot::Layer(1))]
        );
        assert_eq!(slots("blk.3.attn_q.weight", 4, true), vec![("blk.3.attn_q.weight".into(), Slot::Layer(3))]);
        assert_eq!(slots("blk.12.ffn_up.weight", 16, true), vec![("blk.12.ffn_up.weight".into(), Slot::Layer(12))]);
        assert_eq!(slots("norm.weight", 4, true), vec![("norm.weight".into(), Slot::Input)]);
        assert!(targets("blk.4.attn_q.weight", 4, true, "llama").unwrap_err().message.contains("layer 4 is out of range"));
        assert!(targets("blk.99999999999999999999999.x", 4, true, "llama").is_err());
    }

    #[test]
    fn output_group_and_experts() {
        assert!(has_output_group(["token_embd.weight", "output.weight"]));
        assert!(!has_output_group(["token_embd.weight", "output_norm.weight"]));
        assert!(is_expert_tensor("blk.3.ffn_up_exps.weight"));
        assert!(is_expert_tensor("blk.3.ffn_gate_up_exps.bias"));
        assert!(!is_expert_tensor("blk.3.ffn_up.weight"));
        assert!(!is_expert_tensor("blk.3.ffn_up_shexp.weight"));
    }
}

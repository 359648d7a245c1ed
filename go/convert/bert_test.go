package convert

import "testing"

// TestGGUFName: Hugging Face BERT tensor names to llama.cpp's.
func TestGGUFName(t *testing.T) {
	for hf, want := range map[string]string{
		"bert.encoder.layer.11.attention.output.LayerNorm.gamma": "blk.11.attn_output_norm.weight",
		"encoder.layer.0.output.dense.bias":                      "blk.0.ffn_down.bias",
		"embeddings.token_type_embeddings.weight":                "token_types.weight",
		"embeddings.LayerNorm.beta":                              "token_embd_norm.bias",
	} {
		if got, skip, err := GGUFName(hf); got != want || skip || err != nil {
			t.Errorf("%s: got %q, %v, %v; want %q", hf, got, skip, err, want)
		}
	}
	for _, hf := range []string{"embeddings.position_ids", "pooler.dense.weight", "cls.predictions.bias"} {
		if _, skip, err := GGUFName(hf); !skip || err != nil {
			t.Errorf("%s: skip %v, err %v", hf, skip, err)
		}
	}
	if _, _, err := GGUFName("encoder.layer.0.attention.self.rotary.weight"); err == nil {
		t.Error("unknown tensor accepted")
	}
}

package serve

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/ggml-rs/ggml-rs/go/sample"
)

// genOptions are a generation's settings, from either API.
type genOptions struct {
	sampling  sample.Options
	maxTokens int // <= 0: until the end or the context
	numCtx    int // 0: the server's
	stops     []string
	format    string // GBNF the output must follow (format.go; "": free)
	// grammarRoot is format's start rule ("": root).
	grammarRoot string
}

// Limits on stop sequences (OpenAI allows 4; Ollama does not say).
const (
	maxStops    = 16
	maxStopSize = 1024
)

// ollamaDefaults are Ollama's default options.
func ollamaDefaults() genOptions {
	return genOptions{sampling: sample.Options{Temperature: 0.8, TopK: 40, TopP: 0.9, RepeatPenalty: 1.1, RepeatLastN: 64, Seed: -1}}
}

// ollamaIgnored are options Ollama takes that this server accepts and
// does not use (hardware and loading settings are the server's own
// flags; mirostat and typical-p sampling are not implemented).
var ollamaIgnored = map[string]bool{
	"num_keep": true, "typical_p": true, "mirostat": true, "mirostat_tau": true, "mirostat_eta": true,
	"penalize_newline": true, "numa": true, "num_batch": true, "num_gpu": true, "main_gpu": true,
	"low_vram": true, "use_mmap": true, "use_mlock": true, "num_thread": true, "tfs_z": true, "vocab_only": true,
	"f16_kv": true, "logits_all": true,
}

// parseOllamaOptions reads Ollama's "options" object over its defaults.
// Options of the wrong type or out of range are errors; options this
// server does not know are ignored, as Ollama does.
func parseOllamaOptions(raw map[string]json.RawMessage) (genOptions, error) {
	o := ollamaDefaults()
	for k, v := range raw {
		if string(v) == "null" {
			continue
		}
		var err error
		switch k {
		case "temperature":
			o.sampling.Temperature, err = jsonFloat(v)
		case "top_k":
			o.sampling.TopK, err = jsonInt(v)
		case "top_p":
			o.sampling.TopP, err = jsonFloat(v)
		case "min_p":
			o.sampling.MinP, err = jsonFloat(v)
		case "repeat_penalty":
			o.sampling.RepeatPenalty, err = jsonFloat(v)
		case "repeat_last_n":
			o.sampling.RepeatLastN, err = jsonInt(v)
		case "presence_penalty":
			o.sampling.PresencePenalty, err = jsonFloat(v)
		case "frequency_penalty":
			o.sampling.FrequencyPenalty, err = jsonFloat(v)
		case "seed":
			var s int
			s, err = jsonInt(v)
			o.sampling.Seed = int64(s)
		case "num_predict":
			o.maxTokens, err = jsonInt(v)
			if err == nil && o.maxTokens < -2 {
				err = fmt.Errorf("%d: -1 (no limit), -2 (fill the context) or a token count", o.maxTokens)
			}
		case "num_ctx":
			o.numCtx, err = jsonInt(v)
			if err == nil && o.numCtx < 0 {
				err = fmt.Errorf("%d: a token count", o.numCtx)
			}
		case "stop":
			o.stops, err = jsonStops(v)
		default:
			if !ollamaIgnored[k] {
				continue // unknown: ignored, as Ollama
			}
		}
		if err != nil {
			return o, fmt.Errorf("option %s: %w", k, err)
		}
	}
	if err := o.sampling.Validate(); err != nil {
		return o, fmt.Errorf("options: %w", err)
	}
	return o, nil
}

// resolve fixes the seed (a random one when none was given) and the
// context of one request against the engine's, and checks the prompt
// fits. It returns the sequence's context size.
func (o *genOptions) resolve(engineCtx, promptTokens int) (int, error) {
	if o.sampling.Seed < 0 {
		o.sampling.Seed = time.Now().UnixNano()
	}
	limit, err := o.contextLimit(engineCtx)
	if err != nil {
		return 0, err
	}
	if promptTokens >= limit {
		return 0, fmt.Errorf("the prompt is %d tokens, which does not fit the %d-token context", promptTokens, limit)
	}
	return limit, nil
}

// contextLimit is the context of one request: num_ctx, at most the
// engine's, or the engine's.
func (o *genOptions) contextLimit(engineCtx int) (int, error) {
	if o.numCtx > 0 {
		if o.numCtx > engineCtx {
			return 0, fmt.Errorf("num_ctx %d is larger than the server's context of %d tokens per sequence (start the server with a larger -ctx)", o.numCtx, engineCtx)
		}
		return o.numCtx, nil
	}
	return engineCtx, nil
}

// fitsBytes refuses a prompt whose bytes alone show it does not fit the
// context: each token covers at most maxTokenBytes bytes of the text, so
// textBytes need at least textBytes/maxTokenBytes tokens (after the
// before tokens of an earlier context). The same refusal as resolve's,
// said in bytes, without tokenizing.
func fitsBytes(before, textBytes, maxTokenBytes, limit int) error {
	if maxTokenBytes <= 0 {
		return nil
	}
	least := before + (textBytes+maxTokenBytes-1)/maxTokenBytes
	if least >= limit {
		return fmt.Errorf("the prompt is %d bytes, at least %d tokens (a token holds at most %d bytes), which does not fit the %d-token context",
			textBytes, least, maxTokenBytes, limit)
	}
	return nil
}

func jsonFloat(v json.RawMessage) (float32, error) {
	var f float64
	if err := json.Unmarshal(v, &f); err != nil {
		return 0, fmt.Errorf("%s is not a number", clipJSON(v))
	}
	if math.IsInf(f, 0) || math.Abs(f) > math.MaxFloat32 {
		return 0, fmt.Errorf("%s is out of range", clipJSON(v))
	}
	return float32(f), nil
}

func jsonInt(v json.RawMessage) (int, error) {
	var f float64
	if err := json.Unmarshal(v, &f); err != nil {
		return 0, fmt.Errorf("%s is not a number", clipJSON(v))
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, fmt.Errorf("%s is not an integer", clipJSON(v))
	}
	if f > math.MaxInt32 {
		f = math.MaxInt32 // a huge count means "no limit" in effect
	}
	if f < math.MinInt32 {
		f = math.MinInt32
	}
	return int(f), nil
}

// jsonStops reads a stop sequence or a list of them.
func jsonStops(v json.RawMessage) ([]string, error) {
	var list []string
	var one string
	if err := json.Unmarshal(v, &one); err == nil {
		list = []string{one}
	} else if err := json.Unmarshal(v, &list); err != nil {
		return nil, fmt.Errorf("%s is neither a string nor a list of strings", clipJSON(v))
	}
	if len(list) > maxStops {
		return nil, fmt.Errorf("%d stop sequences, at most %d", len(list), maxStops)
	}
	var out []string
	for _, s := range list {
		if len(s) > maxStopSize {
			return nil, fmt.Errorf("a stop sequence of %d bytes, at most %d", len(s), maxStopSize)
		}
		if s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

func clipJSON(v json.RawMessage) string {
	s := string(v)
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return strconv.Quote(s)
}

// parseKeepAlive reads Ollama's keep_alive: a duration string ("5m",
// "1h30m", "-1"), or a number of seconds; negative: forever. null or
// absent: def.
func parseKeepAlive(v json.RawMessage, def time.Duration) (time.Duration, error) {
	if len(v) == 0 || string(v) == "null" {
		return def, nil
	}
	var secs float64
	if err := json.Unmarshal(v, &secs); err == nil {
		if math.IsNaN(secs) || secs > 1e9 {
			return 0, fmt.Errorf("keep_alive %s: out of range", clipJSON(v))
		}
		if secs < 0 {
			return -1, nil
		}
		return time.Duration(secs * float64(time.Second)), nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return 0, fmt.Errorf("keep_alive %s: a duration (\"5m\") or seconds", clipJSON(v))
	}
	if n, err := strconv.ParseFloat(s, 64); err == nil {
		return parseKeepAlive(json.RawMessage(strconv.FormatFloat(n, 'f', -1, 64)), def)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("keep_alive %q: a duration (\"5m\") or seconds", s)
	}
	if d < 0 {
		return -1, nil
	}
	return d, nil
}

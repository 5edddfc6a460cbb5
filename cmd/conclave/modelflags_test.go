package main

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/openai"
)

func parseModelFlags(t *testing.T, args ...string) *modelFlags {
	t.Helper()
	var f modelFlags
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return &f
}

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestModelFlags_Scripted(t *testing.T) {
	t.Parallel()
	cfg, err := parseModelFlags(t).openaiConfig(env())
	if err != nil || cfg != nil {
		t.Fatalf("default: %+v, %v; want the scripted model", cfg, err)
	}
	f, closeModel, err := parseModelFlags(t).factory(env(), slog.New(slog.DiscardHandler))
	defer closeModel()
	if err != nil || f != nil {
		t.Fatalf("factory %v, %v; want nil (the engine's default)", f, err)
	}
	// A command built without flags (tests build serveCmd{…}) has the zero
	// modelFlags: the scripted model too.
	if cfg, err := (&modelFlags{}).openaiConfig(env()); err != nil || cfg != nil {
		t.Fatalf("zero flags: %+v, %v", cfg, err)
	}
}

func TestModelFlags_OpenAI(t *testing.T) {
	t.Parallel()
	f := parseModelFlags(t, "--model", "openai", "--model-url", "https://api.example.com/v1", "--model-name", "big",
		"--role-model", "worker=small", "--role-model", "Synthesizer = big-2", "--model-context-tokens", "8000")
	cfg, err := f.openaiConfig(env("OPENAI_API_KEY", "sk-openai", "CONCLAVE_MODEL_API_KEY", "sk-conclave"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BaseURL != "https://api.example.com/v1" || cfg.Model != "big" || cfg.ContextTokens != 8000 || cfg.APIKey != "sk-conclave" {
		t.Fatalf("config %+v", cfg)
	}
	if cfg.RoleModels[model.RoleWorker] != "small" || cfg.RoleModels[model.RoleSynthesizer] != "big-2" || len(cfg.RoleModels) != 2 {
		t.Fatalf("role models %v", cfg.RoleModels)
	}
	cfg, err = f.openaiConfig(env("OPENAI_API_KEY", "sk-openai"))
	if err != nil || cfg.APIKey != "sk-openai" {
		t.Fatalf("key from OPENAI_API_KEY: %+v, %v", cfg, err)
	}
	if cfg.WaitWhenUnavailable {
		t.Fatal("--model-unavailable defaults to fail")
	}
	f2 := parseModelFlags(t, "--model", "openai", "--model-url", "https://api.example.com/v1", "--model-name", "big", "--model-unavailable", "wait")
	if cfg, err := f2.openaiConfig(env("OPENAI_API_KEY", "k")); err != nil || !cfg.WaitWhenUnavailable {
		t.Fatalf("--model-unavailable wait: %+v, %v", cfg, err)
	}
	if cfg.Inputs != (openai.Inputs{}) {
		t.Fatalf("inputs by default %+v, want none", cfg.Inputs)
	}
	f3 := parseModelFlags(t, "--model", "openai", "--model-url", "https://api.example.com/v1", "--model-name", "big", "--model-inputs", "image,pdf")
	if cfg, err := f3.openaiConfig(env("OPENAI_API_KEY", "k")); err != nil || !cfg.Inputs.Images || !cfg.Inputs.PDF {
		t.Fatalf("--model-inputs image,pdf: %+v, %v", cfg, err)
	}
	if names := f.modelNames(); strings.Join(names, ",") != "big,small,big-2" {
		t.Fatalf("model names %v", names)
	}
	if names := parseModelFlags(t).modelNames(); strings.Join(names, ",") != "scripted" {
		t.Fatalf("scripted model names %v", names)
	}
	// A server on loopback (Ollama, vLLM, llama.cpp) may go without a key.
	f = parseModelFlags(t, "--model", "openai", "--model-url", "http://localhost:11434/v1", "--model-name", "llama3.2")
	if cfg, err := f.openaiConfig(env()); err != nil || cfg.APIKey != "" {
		t.Fatalf("local server: %+v, %v", cfg, err)
	}
}

func TestModelFlags_Errors(t *testing.T) {
	t.Parallel()
	const url, name = "--model-url=https://api.example.com/v1", "--model-name=m"
	key := env("OPENAI_API_KEY", "k")
	for _, tc := range []struct {
		args []string
		env  func(string) string
		want string
	}{
		{[]string{"--model", "gpt"}, key, `invalid --model "gpt": must be scripted or openai`},
		{[]string{"--model", "openai", name}, key, "needs --model-url"},
		{[]string{"--model", "openai", "--model-url", "localhost:8000", name}, key, "invalid --model-url"},
		{[]string{"--model", "openai", url}, key, "needs --model-name"},
		{[]string{"--model", "openai", url, name}, env(), "CONCLAVE_MODEL_API_KEY (or OPENAI_API_KEY)"},
		{[]string{"--model", "openai", url, name, "--role-model", "boss=x"}, key, `invalid --role-model "boss=x": want ROLE=NAME, ROLE one of director, worker, subagent, synthesizer, debater, judge, advisor, steerer`},
		{[]string{"--model", "openai", url, name, "--role-model", "worker"}, key, "invalid --role-model"},
		{[]string{"--model", "openai", url, name, "--role-model", "worker="}, key, "invalid --role-model"},
		{[]string{"--model", "openai", url, name, "--model-context-tokens", "-1"}, key, "invalid --model-context-tokens -1"},
		{[]string{url}, key, "need --model openai"},
		{[]string{"--role-model", "worker=x"}, key, "need --model openai"},
		{[]string{"--model", "openai", url, name, "--model-unavailable", "retry"}, key, `invalid --model-unavailable "retry": must be fail or wait`},
		{[]string{"--model-unavailable", "wait"}, key, "need --model openai"},
		{[]string{"--model", "openai", url, name, "--model-inputs", "image,audio"}, key, `invalid --model-inputs "audio": want image, pdf or both`},
		{[]string{"--model-inputs", "image"}, key, "need --model openai"},
	} {
		_, err := parseModelFlags(t, tc.args...).openaiConfig(tc.env)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want %q", tc.args, err, tc.want)
		}
	}
	if _, err := parseModelFlags(t, "--model", "openai", url, name).openaiConfig(env()); !errors.Is(err, errNoAPIKey) {
		t.Errorf("err %v, want errNoAPIKey", err)
	}
}

// TestModelFlags_UsageErrors: the commands exit 2 with the message.
func TestModelFlags_UsageErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"run", "q", "--model", "nope"},
		{"serve", "--memory", "--addr", "127.0.0.1:0", "--model", "openai", "--model-url", "https://api.example.com/v1", "--model-name", "m"},
	} {
		r := runCLI(t, t.Context(), nil, false, args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "--model") {
			t.Errorf("%v: exit %d, stderr %s", args, r.code, r.stderr)
		}
	}
}

// TestModelFlags_Bounds: the turn bounds reach the engine's config, 0
// turning a bound off; without flags the engine keeps its defaults.
func TestModelFlags_Bounds(t *testing.T) {
	t.Parallel()
	var cfg actors.Config
	if err := parseModelFlags(t).bounds(&cfg); err != nil {
		t.Fatal(err)
	}
	want := actors.Config{ModelIdleTimeout: actors.DefaultModelIdleTimeout, ModelTurnTimeout: actors.DefaultModelTurnTimeout,
		MaxDeltaBytes: actors.DefaultMaxDeltaBytes, MaxTurnOutputBytes: actors.DefaultMaxTurnOutputBytes}
	if cfg.ModelIdleTimeout != want.ModelIdleTimeout || cfg.ModelTurnTimeout != want.ModelTurnTimeout ||
		cfg.MaxDeltaBytes != want.MaxDeltaBytes || cfg.MaxTurnOutputBytes != want.MaxTurnOutputBytes {
		t.Fatalf("default flags: %+v", cfg)
	}
	cfg = actors.Config{}
	f := parseModelFlags(t, "--model-idle-timeout=45s", "--model-turn-timeout=0", "--model-max-delta=1024", "--model-max-output=0")
	if err := f.bounds(&cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.ModelIdleTimeout != 45*time.Second || cfg.ModelTurnTimeout >= 0 || cfg.MaxDeltaBytes != 1024 || cfg.MaxTurnOutputBytes >= 0 {
		t.Fatalf("flags: %+v, want idle 45s, no turn deadline, 1024-byte deltas, no output bound", cfg)
	}
	cfg = actors.Config{}
	if err := (&modelFlags{}).bounds(&cfg); err != nil || cfg.ModelIdleTimeout != 0 || cfg.MaxTurnOutputBytes != 0 {
		t.Fatalf("zero flags: %+v, %v; want the engine's defaults (zero fields)", cfg, err)
	}
	for _, args := range [][]string{{"--model-idle-timeout=-1s"}, {"--model-max-output=-5"}} {
		if err := parseModelFlags(t, args...).bounds(&actors.Config{}); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

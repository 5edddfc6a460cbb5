package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/openai"
	"github.com/conclave-ai/conclave/model/scripted"
)

// Values of --model-unavailable.
const (
	unavailableFail = "fail"
	unavailableWait = "wait"
)

// Model backends of --model.
const (
	backendScripted = "scripted"
	backendOpenAI   = "openai"
)

// modelFlags are the model flags serve and run share. The API key is never
// a flag (it would show in ps and shell history): it comes from
// CONCLAVE_MODEL_API_KEY, else OPENAI_API_KEY.
type modelFlags struct {
	backend          string
	url              string
	name             string
	roleModels       []string // ROLE=NAME
	contextTokens    int
	noResponseFormat bool
	inputs           []string // --model-inputs: image, pdf
	unavailable      string   // --model-unavailable: fail or wait
	// Bounds of every model turn, whatever the backend (actors.Config).
	idleTimeout, turnTimeout time.Duration
	maxDelta, maxOutput      int
	maxTurns                 int
	openaiModel              *openai.Model // the openai backend, once factory made it
	registered               bool          // the bounds are flags: bounds applies them
}

func (f *modelFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.backend, "model", backendScripted, "model backend: scripted (deterministic, built in) or openai (any OpenAI-compatible Chat Completions server; key from $"+openai.EnvAPIKey+" or $"+openai.EnvOpenAIAPIKey+")")
	fs.StringVar(&f.url, "model-url", "", "API root of the OpenAI-compatible server, e.g. https://api.openai.com/v1, http://localhost:11434/v1 (Ollama)")
	fs.StringVar(&f.name, "model-name", "", "model name of every role --role-model does not name")
	fs.StringArrayVar(&f.roleModels, "role-model", nil, "model name of one role, ROLE=NAME (repeatable); roles: "+strings.Join(roleNames(), ", "))
	fs.IntVar(&f.contextTokens, "model-context-tokens", 0, "context budget of one request in estimated tokens (4 bytes a token); over it the oldest inputs and turns are left out (0: no budget)")
	fs.BoolVar(&f.noResponseFormat, "model-no-response-format", false, "do not ask the director and steerer for response_format json_schema")
	fs.StringSliceVar(&f.inputs, "model-inputs", nil, "attached files the model takes as content parts: image (PNG, JPEG, GIF, WebP as image_url), pdf (as file parts); comma-separated. Without them a run's images and PDFs are only named in the prompt (text files always go in it)")
	fs.StringVar(&f.unavailable, "model-unavailable", unavailableFail, "while the model endpoint's circuit breaker is open: fail (new turns fail at once with model_unavailable) or wait (they wait for it to answer again, at most --model-turn-timeout)")
	f.registered = true
	fs.DurationVar(&f.idleTimeout, "model-idle-timeout", actors.DefaultModelIdleTimeout, "fail a model turn that sends no chunk for this long, the first one included (node_failed code timeout); 0: no bound")
	fs.DurationVar(&f.turnTimeout, "model-turn-timeout", actors.DefaultModelTurnTimeout, "fail a model turn that lasts longer than this (code timeout); 0: no bound")
	fs.IntVar(&f.maxDelta, "model-max-delta", actors.DefaultMaxDeltaBytes, "bytes of one text or reasoning delta event: a larger model chunk is published as several events")
	fs.IntVar(&f.maxTurns, "max-agent-turns", actors.DefaultMaxAgentTurns, "model turns of one agent: past them it fails with code turn_limit (a model calling tools every turn loops and spends without end); 0: no bound")
	fs.IntVar(&f.maxOutput, "model-max-output", actors.DefaultMaxTurnOutputBytes, "bytes of text and reasoning of one model turn: at the bound the text is cut, a warning output_truncated is published and the turn ends; 0: no bound")
}

// bounds checks the turn bounds and sets them in cfg. The zero
// modelFlags (a command built without flags) keeps the engine's defaults.
func (f *modelFlags) bounds(cfg *actors.Config) error {
	if !f.registered {
		return nil
	}
	if f.idleTimeout < 0 || f.turnTimeout < 0 {
		return fmt.Errorf("--model-idle-timeout and --model-turn-timeout must be 0 (no bound) or more, got %v and %v", f.idleTimeout, f.turnTimeout)
	}
	if f.maxTurns < 0 {
		return fmt.Errorf("--max-agent-turns must be 0 (no bound) or more, got %d", f.maxTurns)
	}
	cfg.MaxAgentTurns = f.maxTurns
	if f.maxTurns == 0 {
		cfg.MaxAgentTurns = -1
	}
	if f.maxDelta < 0 || f.maxOutput < 0 {
		return fmt.Errorf("--model-max-delta and --model-max-output must be 0 or more, got %d and %d", f.maxDelta, f.maxOutput)
	}
	off := func(d time.Duration) time.Duration {
		if d == 0 {
			return -1
		}
		return d
	}
	cfg.ModelIdleTimeout, cfg.ModelTurnTimeout = off(f.idleTimeout), off(f.turnTimeout)
	cfg.MaxDeltaBytes = f.maxDelta
	cfg.MaxTurnOutputBytes = f.maxOutput
	if f.maxOutput == 0 {
		cfg.MaxTurnOutputBytes = -1
	}
	return nil
}

// allRoles are the roles --role-model accepts, in order.
var allRoles = []model.Role{
	model.RoleDirector, model.RoleWorker, model.RoleSubagent, model.RoleSynthesizer,
	model.RoleDebater, model.RoleJudge, model.RoleAdvisor, model.RoleSteerer,
}

func roleNames() []string {
	names := make([]string, len(allRoles))
	for i, r := range allRoles {
		names[i] = r.String()
	}
	return names
}

func parseRole(s string) (model.Role, bool) {
	for _, r := range allRoles {
		if strings.EqualFold(s, r.String()) {
			return r, true
		}
	}
	return 0, false
}

// errNoAPIKey is returned for a remote server when no key is set.
var errNoAPIKey = errors.New("--model openai needs an API key: set " + openai.EnvAPIKey + " (or " + openai.EnvOpenAIAPIKey + "); a server on loopback may go without")

// openaiConfig checks the flags and returns the backend's configuration,
// nil for the scripted model. getenv reads the API key.
func (f *modelFlags) openaiConfig(getenv func(string) string) (*openai.Config, error) {
	switch f.backend {
	case backendScripted, "": // the zero modelFlags (a command built without flags) is the scripted model
		if f.url != "" || f.name != "" || len(f.roleModels) > 0 || f.contextTokens != 0 || f.noResponseFormat || f.unavailable == unavailableWait || len(f.inputs) > 0 {
			return nil, errors.New("--model-url, --model-name, --role-model, --model-context-tokens, --model-no-response-format, --model-inputs and --model-unavailable wait need --model openai")
		}
		return nil, nil
	case backendOpenAI:
	default:
		return nil, fmt.Errorf("invalid --model %q: must be %s or %s", f.backend, backendScripted, backendOpenAI)
	}
	if f.url == "" {
		return nil, errors.New("--model openai needs --model-url, e.g. https://api.openai.com/v1 or http://localhost:11434/v1")
	}
	u, err := url.Parse(f.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("invalid --model-url %q: want an http(s) URL such as http://localhost:8000/v1", f.url)
	}
	if f.name == "" {
		return nil, errors.New("--model openai needs --model-name (the model of every role --role-model does not name)")
	}
	if f.contextTokens < 0 {
		return nil, fmt.Errorf("invalid --model-context-tokens %d: must be 0 (no budget) or more", f.contextTokens)
	}
	switch f.unavailable {
	case "", unavailableFail, unavailableWait:
	default:
		return nil, fmt.Errorf("invalid --model-unavailable %q: must be %s or %s", f.unavailable, unavailableFail, unavailableWait)
	}
	roles := map[model.Role]string{}
	for _, rm := range f.roleModels {
		role, name, ok := strings.Cut(rm, "=")
		r, known := parseRole(strings.TrimSpace(role))
		name = strings.TrimSpace(name)
		if !ok || !known || name == "" {
			return nil, fmt.Errorf("invalid --role-model %q: want ROLE=NAME, ROLE one of %s", rm, strings.Join(roleNames(), ", "))
		}
		roles[r] = name
	}
	var in openai.Inputs
	for _, v := range f.inputs {
		switch strings.TrimSpace(v) {
		case "image":
			in.Images = true
		case "pdf":
			in.PDF = true
		default:
			return nil, fmt.Errorf("invalid --model-inputs %q: want image, pdf or both", v)
		}
	}
	key := openai.KeyFromEnv(getenv)
	if key == "" && !isLoopbackHost(u.Hostname()) {
		return nil, errNoAPIKey
	}
	return &openai.Config{
		BaseURL: f.url, APIKey: key, Model: f.name, RoleModels: roles,
		ContextTokens: f.contextTokens, NoResponseFormat: f.noResponseFormat, Inputs: in,
		WaitWhenUnavailable: f.unavailable == unavailableWait,
	}, nil
}

func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// factory returns the engine's model factory (nil: the engine's default,
// the scripted model) and what closes the model's connections once the
// engine has shut down, and logs which model is in use — never the key.
func (f *modelFlags) factory(getenv func(string) string, logger *slog.Logger) (model.Factory, func(), error) {
	cfg, err := f.openaiConfig(getenv)
	if err != nil || cfg == nil {
		return nil, func() {}, err
	}
	cfg.Logger = logger
	m, err := openai.New(*cfg)
	if err != nil {
		return nil, func() {}, err
	}
	attrs := []any{"url", cfg.BaseURL, "model", cfg.Model, "api_key_set", cfg.APIKey != ""}
	for _, r := range allRoles {
		if n, ok := cfg.RoleModels[r]; ok {
			attrs = append(attrs, r.String(), n)
		}
	}
	if cfg.ContextTokens > 0 {
		attrs = append(attrs, "context_tokens", cfg.ContextTokens)
	}
	logger.Info("model: openai-compatible", attrs...)
	f.openaiModel = m
	return m.Factory(), m.Close, nil
}

// modelNames are the names of the models runs are configured to use: the
// scripted model's, or --model-name and each --role-model's.
func (f *modelFlags) modelNames() []string {
	if f.backend != backendOpenAI {
		return []string{scripted.Name}
	}
	names := []string{f.name}
	for _, rm := range f.roleModels {
		if _, name, ok := strings.Cut(rm, "="); ok {
			names = append(names, strings.TrimSpace(name))
		}
	}
	return names
}

// notReady says the model is not ready while its endpoint's circuit
// breaker is open (GET /readyz); the scripted model is always ready.
func (f *modelFlags) notReady() []messages.NotReady {
	if f.openaiModel == nil {
		return nil
	}
	if why := f.openaiModel.Unavailable(); why != "" {
		return []messages.NotReady{{Component: "model " + f.openaiModel.Endpoint(), Reason: why}}
	}
	return nil
}

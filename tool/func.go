package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
)

// Option adjusts a Func tool's definition.
type Option func(*Def)

// WithRisk sets the tool's risk level (default RiskLow).
func WithRisk(r Risk) Option { return func(d *Def) { d.Risk = r } }

// WithTimeout bounds each call (default: the engine's tool timeout).
func WithTimeout(t time.Duration) Option { return func(d *Def) { d.Timeout = t } }

// Func makes a typed Go function a tool. Its argument schema is generated
// from In, a struct (exported fields, named by their json tags, described
// by `jsonschema:"..."` tags); a call's arguments are validated against it,
// then decoded into In. The result is Out encoded as JSON, or Out itself
// when it is a string or a Result (a Result carries sources).
func Func[In, Out any](name, description string, fn func(context.Context, In) (Out, error), opts ...Option) (Tool, error) {
	sc, err := jsonschema.For[In](nil)
	if err != nil {
		return nil, fmt.Errorf("tool: %s: schema of its arguments: %w", name, err)
	}
	raw, err := json.Marshal(sc)
	if err != nil {
		return nil, fmt.Errorf("tool: %s: %w", name, err)
	}
	d := Def{Name: name, Description: description, Schema: raw}
	for _, o := range opts {
		o(&d)
	}
	return &funcTool[In, Out]{def: d, fn: fn}, nil
}

type funcTool[In, Out any] struct {
	def Def
	fn  func(context.Context, In) (Out, error)
}

func (f *funcTool[In, Out]) Def() Def { return f.def }

func (f *funcTool[In, Out]) Call(ctx context.Context, args json.RawMessage) (Result, error) {
	var in In
	if len(args) > 0 {
		if err := json.Unmarshal(args, &in); err != nil {
			return Result{}, fmt.Errorf("%w for %s: %v", ErrInvalidArgs, f.def.Name, err)
		}
	}
	out, err := f.fn(ctx, in)
	if err != nil {
		return Result{}, err
	}
	switch v := any(out).(type) {
	case string:
		return Result{Content: v}, nil
	case Result:
		return v, nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return Result{}, fmt.Errorf("tool: %s: encode its result: %w", f.def.Name, err)
	}
	return Result{Content: string(b)}, nil
}

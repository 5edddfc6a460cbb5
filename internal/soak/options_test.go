package soak

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

func nopLaunch(context.Context, ServerConfig) (*Server, error) { return nil, errors.New("not used") }

func TestOptions_Defaults(t *testing.T) {
	t.Parallel()
	o := Options{Launch: nopLaunch}.withDefaults()
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	if o.Runs != 20000 || o.InFlight != 32 || o.Clients != 1000 || o.Warmup != 0.2 || o.Sample != time.Second ||
		o.HubIdleAfter != 10*time.Second || o.Heartbeat != 10*time.Second || string(o.Scenario) != DefaultScenario {
		t.Errorf("defaults %+v", o)
	}
	if got := o.warmupRuns(); got != 4000 {
		t.Errorf("warm-up runs %d, want 4000", got)
	}
	if o := (Options{Clients: -1}).withDefaults(); o.Clients != 0 {
		t.Errorf("clients -1 became %d, want 0 (none)", o.Clients)
	}
}

func TestOptions_Invalid(t *testing.T) {
	t.Parallel()
	for name, o := range map[string]Options{
		"no launcher":      {},
		"negative runs":    {Launch: nopLaunch, Runs: -1},
		"warm-up of 1":     {Launch: nopLaunch, Warmup: 1},
		"sessions":         {Launch: nopLaunch, Sessions: -2},
		"tiny sample":      {Launch: nopLaunch, Sample: time.Millisecond},
		"tiny idle":        {Launch: nopLaunch, HubIdleAfter: time.Millisecond},
		"unknown scenario": {Launch: nopLaunch, Scenario: json.RawMessage(`{"nodes":3,"colour":"red"}`)},
		"not JSON":         {Launch: nopLaunch, Scenario: json.RawMessage(`{nodes:3}`)},
	} {
		err := o.withDefaults().validate()
		var oe *OptionsError
		if !errors.As(err, &oe) {
			t.Errorf("%s: err = %v, want an *OptionsError", name, err)
		}
	}
}

func TestRun_RefusesBadOptions(t *testing.T) {
	t.Parallel()
	_, err := Run(t.Context(), Options{Launch: nopLaunch, Warmup: 2})
	var oe *OptionsError
	if !errors.As(err, &oe) {
		t.Errorf("err = %v, want an *OptionsError", err)
	}
}

package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/spf13/pflag"

	"github.com/conclave-ai/conclave/remote"
	"github.com/conclave-ai/conclave/transport/a2a"
	"github.com/conclave-ai/conclave/transport/a2a/a2aclient"
)

// remoteAgentFlags: --a2a-agent name=URL[,auth_env=VAR], repeatable: the
// remote A2A agents a plan node may name (PlanNode.Agent).
type remoteAgentFlags struct {
	specs []string
}

func (f *remoteAgentFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.specs, "a2a-agent", nil, "a remote A2A agent plan nodes may name: `NAME=CARD_URL[,auth_env=VAR]` (the agent card's URL; VAR holds the Authorization header's value, e.g. \"Bearer …\"); repeatable")
}

// remoteAgentSpec is one parsed --a2a-agent.
type remoteAgentSpec struct {
	name, cardURL, authEnv string
}

var agentName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// parse checks every --a2a-agent (a usage error before anything starts).
func (f *remoteAgentFlags) parse() ([]remoteAgentSpec, error) {
	var out []remoteAgentSpec
	seen := map[string]bool{}
	for _, s := range f.specs {
		name, rest, ok := strings.Cut(s, "=")
		if !ok || !agentName.MatchString(name) {
			return nil, fmt.Errorf("--a2a-agent %q: want NAME=CARD_URL[,auth_env=VAR] with a NAME of letters, digits, '.', '_' or '-'", s)
		}
		if seen[name] {
			return nil, fmt.Errorf("--a2a-agent: %q is given twice", name)
		}
		seen[name] = true
		sp := remoteAgentSpec{name: name}
		fields := strings.Split(rest, ",")
		sp.cardURL = fields[0]
		if u, err := url.Parse(sp.cardURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("--a2a-agent %s: %q is not an http(s) URL", name, sp.cardURL)
		}
		for _, kv := range fields[1:] {
			k, v, _ := strings.Cut(kv, "=")
			switch {
			case k == "auth_env" && v != "":
				sp.authEnv = v
			default:
				return nil, fmt.Errorf("--a2a-agent %s: unknown option %q (known: auth_env=VAR)", name, kv)
			}
		}
		out = append(out, sp)
	}
	return out, nil
}

// secretValues are the Authorization values the agents are called with
// (masked in every log line and event).
func (f *remoteAgentFlags) secretValues(env func(string) string) []string {
	specs, _ := f.parse()
	var out []string
	for _, sp := range specs {
		if sp.authEnv != "" {
			out = append(out, env(sp.authEnv))
		}
	}
	return out
}

// registry fetches every agent's card, in parallel, and registers it; an
// agent that cannot be reached (or whose card is refused) is a warning,
// and registered as unavailable: a node that names it fails with why.
func (f *remoteAgentFlags) registry(ctx context.Context, env func(string) string, logger *slog.Logger) (*remote.Registry, error) {
	specs, err := f.parse()
	if err != nil || len(specs) == 0 {
		return nil, err
	}
	type dialled struct {
		c   *a2aclient.Client
		err error
	}
	res := make([]dialled, len(specs))
	var wg sync.WaitGroup
	cfgs := make([]a2aclient.Config, len(specs))
	for i, sp := range specs {
		if sp.authEnv != "" {
			v := env(sp.authEnv)
			if v == "" {
				return nil, fmt.Errorf("--a2a-agent %s: auth_env %s is not set", sp.name, sp.authEnv)
			}
			cfgs[i].Header = http.Header{"Authorization": {v}}
		}
		wg.Go(func() { // waited for below
			c, err := a2aclient.Dial(ctx, sp.cardURL, cfgs[i])
			res[i] = dialled{c, err}
		})
	}
	wg.Wait()
	reg := &remote.Registry{}
	for i, sp := range specs {
		var agent remote.Agent
		if res[i].err != nil {
			// An outage, or a remote started after us: the card is fetched
			// again when a node names the agent (at most every 10 s), and a
			// node fails with why until it can be.
			logger.Warn("remote A2A agent unavailable at start: its card is fetched again when a node names it", "agent", sp.name, "card", sp.cardURL, "error", res[i].err)
			agent = a2aclient.NewLazy(sp.name, sp.cardURL, cfgs[i], res[i].err, a2aclient.DefaultRedialAfter, nil)
		} else {
			agent = a2aclient.NewAgent(sp.name, res[i].c)
			card := res[i].c.Card()
			logger.Info("remote A2A agent", "agent", sp.name, "card_name", card.Name, "rpc", res[i].c.URL())
		}
		if err := reg.Add(sp.name, agent, nil); err != nil {
			return nil, err
		}
		if res[i].err == nil {
			reg.Describe(sp.name, cardDescription(res[i].c.Card()))
		}
	}
	return reg, nil
}

// cardDescription is what a director is told of an agent: its card's
// description and skills, bounded (a card is the remote's text).
func cardDescription(c a2a.AgentCard) string {
	d := c.Name
	if c.Description != "" {
		d += " — " + c.Description
	}
	for i, s := range c.Skills {
		if i == 8 {
			break
		}
		d += "; skill " + s.Name
		if s.Description != "" {
			d += ": " + s.Description
		}
	}
	if len(d) > 1000 {
		d = strings.ToValidUTF8(d[:1000], "") + "…"
	}
	return d
}

package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// TestCrash_KillNineMidFeature kills `conclave serve --data` with SIGKILL
// in the middle of each council feature — a team's nested wave, a
// debate's second round, a pending spawn gate, a posted steering diff
// waiting for its boundary, an advisor redirect, async delegation — then
// starts it again on the same directory, answers what asks for a human,
// and checks that the run finishes (run_finished, every node completed)
// and that the session's whole stream, across the kill, passes
// testkit.Check.
func TestCrash_KillNineMidFeature(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		// body starts the run; trigger is the event to kill after.
		body    string
		trigger func(*messages.Envelope) bool
		// during runs once trigger was seen, before the kill.
		during func(t *testing.T, a *hardenAPI, run messages.RunID)
		// firstAnswer, when set, answers the first gate before the trigger
		// (the others are approved).
		firstAnswer string
		// want checks the events once the run ended.
		want func(t *testing.T, events []*messages.Envelope)
	}{
		{name: "team",
			body: `{"question":"q","scenario":{"nodes":3,"waves":2,"teams":1,"team_size":3,"tokens":30,"token_delay_ms":3}}`,
			trigger: func(env *messages.Envelope) bool {
				return env.Type == messages.TextDelta && strings.HasPrefix(string(env.Lane.StreamID), "node:n001/")
			},
			want: func(t *testing.T, events []*messages.Envelope) {
				if testkit.Count(events, messages.TeamSynthesized) != 1 {
					t.Error("the team did not synthesise once")
				}
			}},
		{name: "re-planning",
			body:        `{"question":"q","hitl":"plan","scenario":{"nodes":3,"waves":2,"tokens":20,"token_delay_ms":3}}`,
			firstAnswer: `{"decision":"reject","reason":"fewer nodes"}`,
			trigger:     func(env *messages.Envelope) bool { return env.Type == messages.ReplanAttempt },
			want: func(t *testing.T, events []*messages.Envelope) {
				if testkit.Count(events, messages.ReplanAttempt) != 1 || testkit.Count(events, messages.PlanProposed) != 2 {
					t.Errorf("%d replan_attempt, %d plan_proposed; want 1 and 2", testkit.Count(events, messages.ReplanAttempt), testkit.Count(events, messages.PlanProposed))
				}
			}},
		{name: "debate round restarted",
			body:    `{"question":"q","scenario":{"nodes":2,"waves":1,"tokens":30,"token_delay_ms":3,"debate":{"agents":2,"rounds":2,"judge":true,"panic_round":2}}}`,
			trigger: func(env *messages.Envelope) bool { return env.Type == messages.DebateRoundRestarted },
			want: func(t *testing.T, events []*messages.Envelope) {
				if n := testkit.Count(events, messages.DebateRoundRestarted); n != 1 {
					t.Errorf("%d debate_round_restarted, want 1", n)
				}
			}},
		{name: "debate",
			body: `{"question":"q","scenario":{"nodes":2,"waves":1,"tokens":30,"token_delay_ms":3,"debate":{"agents":2,"rounds":3,"judge":true}}}`,
			trigger: func(env *messages.Envelope) bool {
				p, ok := env.Payload.(*messages.DebateTurnStartedPayload)
				return ok && p.Round == 2
			},
			want: func(t *testing.T, events []*messages.Envelope) {
				if testkit.Count(events, messages.DebateStanceMap) != 1 {
					t.Error("the debate gave no stance map")
				}
			}},
		{name: "spawn gate",
			body: `{"question":"q","hitl":"node","approval_timeout_seconds":3600,"scenario":{"nodes":3,"waves":2,"tokens":10,"token_delay_ms":2,"spawn":["n001"]}}`,
			trigger: func(env *messages.Envelope) bool {
				p, ok := env.Payload.(*messages.InterruptRaisedPayload)
				return ok && p.Kind == messages.InterruptSpawnApproval
			},
			want: func(t *testing.T, events []*messages.Envelope) {
				if testkit.Count(events, messages.SubteamSpawned) != 1 {
					t.Error("the approved sub-team was not spawned")
				}
			}},
		{name: "steering diff",
			body: `{"question":"q","scenario":{"nodes":4,"waves":2,"tokens":40,"token_delay_ms":5}}`,
			trigger: func(env *messages.Envelope) bool {
				p, ok := env.Payload.(*messages.WaveStartedPayload)
				return ok && p.Wave == 0 && p.Team == ""
			},
			during: func(t *testing.T, a *hardenAPI, run messages.RunID) {
				diff := `{"diff":{"ops":[{"op":"set_role","node_id":"n004","role":"skeptic"}]}}`
				if code, _, b := a.call(t, http.MethodPost, "/api/v1/runs/"+url.PathEscape(string(run))+"/steer", diff); code != http.StatusAccepted {
					t.Fatalf("steer = %d %s", code, b)
				}
				// Wait until it is journaled (its lane opened) before the kill.
				a.waitStreamEvent(t, run, func(env *messages.Envelope) bool { return env.Type == messages.SteeringReceived })
			},
			want: func(t *testing.T, events []*messages.Envelope) {
				if testkit.Count(events, messages.SteeringApplied) != 1 {
					t.Error("the steering diff was not applied at the boundary after the restart")
				}
			}},
		{name: "advisor",
			body:    `{"question":"q","advisor":{"max_redirects":2},"scenario":{"nodes":3,"waves":1,"tokens":30,"token_delay_ms":3,"advisor":{"redirects":1}}}`,
			trigger: func(env *messages.Envelope) bool { return env.Type == messages.Advisor },
		},
		{name: "async delegation",
			body: `{"question":"q","scenario":{"nodes":2,"waves":1,"tokens":20,"token_delay_ms":3,"delegations":{"async":2}}}`,
			trigger: func(env *messages.Envelope) bool {
				p, ok := env.Payload.(*messages.SubagentStartedPayload)
				return ok && p.Async
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			args := []string{"--data", t.TempDir(), "--runs-per-second", "-1"}
			srv := startServe(t, 0, nil, args...)
			a := newHardenAPI(t, srv, "")
			rc := a.mustStartRun(t, c.body)
			s := a.mustStream(t, rc.SessionID, 0)
			for {
				f, err := s.next()
				if err != nil {
					t.Fatalf("before the trigger: %v", err)
				}
				env, err := f.env()
				if err != nil {
					t.Fatal(err)
				}
				if env.Type.Terminal() {
					t.Fatalf("the run ended (%s) before the trigger", env.Type)
				}
				if c.trigger(env) {
					break
				}
				if p, ok := env.Payload.(*messages.InterruptRaisedPayload); ok { // the gates before the feature
					answer := `{"decision":"approve"}`
					if c.firstAnswer != "" {
						answer, c.firstAnswer = c.firstAnswer, ""
					}
					if code, _, b := a.call(t, http.MethodPost, "/api/v1/events/resume/"+url.PathEscape(p.InterruptID), answer); code != http.StatusOK {
						t.Fatalf("approve %s = %d %s", p.Kind, code, b)
					}
				}
			}
			if c.during != nil {
				c.during(t, a, rc.RunID)
			}
			s.close()
			_ = srv.cmd.Process.Kill() // kill -9
			srv.reap()

			srv = startServe(t, 0, nil, args...)
			a = newHardenAPI(t, srv, "")
			// Answer whatever asks a human (plan, node and spawn gates), until the run ends.
			deadline := time.Now().Add(hardenWait)
			for {
				sum, err := a.runSummary(rc.RunID)
				if err != nil {
					t.Fatal(err)
				}
				if sum.Status.Terminal() {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the run is still %s %v after the restart", sum.Status, hardenWait)
				}
				a.approveAll(t, rc.SessionID)
				time.Sleep(20 * time.Millisecond) // a poll of the run's status, with a deadline
			}
			events := a.runEvents(t, rc.SessionID, rc.RunID)
			testkit.AssertInvariants(t, events)
			fin, ok := testkit.Terminal(events, rc.RunID).Payload.(*messages.RunFinishedPayload)
			if !ok || fin.Nodes.Completed != fin.Nodes.Total {
				t.Fatalf("the run ended %s %+v, want run_finished with every node completed", testkit.Terminal(events, rc.RunID).Type, testkit.Terminal(events, rc.RunID).Payload)
			}
			if c.want != nil {
				c.want(t, events)
			}
		})
	}
}

// approveAll approves every pending interrupt of a session.
func (a *hardenAPI) approveAll(t *testing.T, session messages.SessionID) {
	t.Helper()
	code, _, b := a.call(t, http.MethodGet, "/api/v1/interrupts?session_id="+url.QueryEscape(string(session)), "")
	if code != http.StatusOK {
		t.Fatalf("GET interrupts = %d %s", code, b)
	}
	var list messages.InterruptList
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatal(err)
	}
	for _, in := range list.Interrupts {
		// 409: answered meanwhile (or being answered): fine.
		if code, _, b := a.call(t, http.MethodPost, "/api/v1/events/resume/"+url.PathEscape(in.InterruptID), `{"decision":"approve"}`); code != http.StatusOK && code != http.StatusConflict {
			t.Fatalf("approve %s = %d %s", in.InterruptID, code, b)
		}
	}
}

// waitStreamEvent reads the run's session from its start until want.
func (a *hardenAPI) waitStreamEvent(t *testing.T, run messages.RunID, want func(*messages.Envelope) bool) {
	t.Helper()
	sum, err := a.runSummary(run)
	if err != nil {
		t.Fatal(err)
	}
	s := a.mustStream(t, sum.SessionID, 0)
	defer s.close()
	for {
		if env := s.mustEnv(t); env.RunID == run && want(env) {
			return
		}
	}
}

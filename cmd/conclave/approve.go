package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/conclave-ai/conclave/governance"
	"github.com/conclave-ai/conclave/messages"
)

// approveCmd holds the flags of `conclave approve`.
type approveCmd struct {
	app        *app
	key        string
	approver   string
	server     string
	decision   string
	editedArgs string
	choose     string
	timeout    time.Duration
	yes        bool
}

func newApproveCmd(a *app) *cobra.Command {
	c := &approveCmd{app: a}
	cmd := &cobra.Command{
		Use:   "approve INTERRUPT_ID --key FILE --server URL",
		Short: "Sign an approval decision with an approver's ML-DSA-65 key and send it",
		Long: `approve fetches the interrupt from the server, shows its evidence package
and asks whether to sign (--yes signs without asking), then signs the
statement {interrupt_id, evidence_digest, decision, edited_args}
(RFC 8785 canonical JSON, ML-DSA-65, context "conclave/approval/v1"; see
docs/governance.md) with the approver's key and sends it as a resume. The
decision happens once the policy's m approvers have signed it; until then
the server answers 202 with the signatures so far.

A choice question (interrupt kind choice) needs no key: approve shows its
options numbered and asks which (--choose answers without asking: option
numbers, ids or labels, comma-separated for a multiple choice); --decision
reject declines it.

The bearer token, if the server needs one, is read from CONCLAVE_TOKEN.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError(errors.New("expected one interrupt id: conclave approve INTERRUPT_ID --key FILE --server URL"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return c.run(cmd.Context(), args[0]) },
	}
	fs := cmd.Flags()
	fs.StringVar(&c.key, "key", "", "the approver's private key `file` (NAME.key, from conclave keys generate)")
	fs.StringVar(&c.approver, "approver", "", "approver name (default: the key file's name without .key)")
	fs.StringVar(&c.server, "server", "http://127.0.0.1:8080", "the conclave server's base `URL`")
	fs.StringVar(&c.decision, "decision", string(messages.DecisionApprove), "approve|reject|revise")
	fs.StringVar(&c.choose, "choose", "", "answer a choice question: option `numbers, ids or labels` (comma-separated for a multiple choice)")
	fs.StringVar(&c.editedArgs, "edited-args", "", "with --decision revise: the tool's full replacement arguments, a JSON object")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "how long to wait for the server (each request; not your answer)")
	fs.BoolVarP(&c.yes, "yes", "y", false, "sign without asking")
	return cmd
}

func (c *approveCmd) run(ctx context.Context, id string) error {
	base, err := url.Parse(c.server)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return usageError(fmt.Errorf("invalid --server %q: want http(s)://host:port", c.server))
	}
	if c.key == "" || c.choose != "" {
		// Without a key only a choice can be answered: see which it is.
		cl := &apiClient{base: base, token: c.app.env("CONCLAVE_TOKEN")}
		in, err := c.fetch(ctx, cl, id)
		if err != nil {
			return failure(err)
		}
		switch {
		case in.InterruptRaisedPayload != nil && in.Kind == messages.InterruptChoice:
			return c.answerChoice(ctx, cl, in)
		case c.choose != "":
			return usageError(fmt.Errorf("--choose answers a choice question; interrupt %s is not one", id))
		}
		return usageError(errors.New("--key is required"))
	}
	d := messages.Decision(c.decision)
	switch d {
	case messages.DecisionApprove, messages.DecisionReject:
		if c.editedArgs != "" {
			return usageError(errors.New("--edited-args goes with --decision revise"))
		}
	case messages.DecisionRevise:
		var obj map[string]json.RawMessage
		if json.Unmarshal([]byte(c.editedArgs), &obj) != nil {
			return usageError(errors.New("--decision revise needs --edited-args, a JSON object"))
		}
	default:
		return usageError(fmt.Errorf("invalid --decision %q: approve, reject or revise", c.decision))
	}
	sk, err := governance.ReadPrivateKey(c.key)
	if err != nil {
		return usageError(fmt.Errorf("--key: %w", err))
	}
	approver := c.approver
	if approver == "" {
		approver = strings.TrimSuffix(filepath.Base(c.key), ".key")
	}
	cl := &apiClient{base: base, token: c.app.env("CONCLAVE_TOKEN")}
	in, err := c.fetch(ctx, cl, id)
	if err != nil {
		return failure(err)
	}
	if in.InterruptRaisedPayload == nil || in.Approval == nil {
		return failure(fmt.Errorf("interrupt %s needs no signature; answer it with a plain resume", id))
	}
	showEvidence(c.app.stderr, in)
	st := messages.ApprovalStatement{InterruptID: id, EvidenceDigest: in.Approval.EvidenceDigest, Decision: d}
	if c.editedArgs != "" {
		st.EditedArgs = json.RawMessage(c.editedArgs)
	}
	if !c.yes {
		if err := c.confirm(ctx, fmt.Sprintf("Sign %s of %s as %s? [y/N] ", d, id, approver)); err != nil {
			return failure(err)
		}
	}
	sig, err := governance.Sign(sk, st)
	if err != nil {
		return failure(err)
	}
	res := messages.Resume{Decision: d, EditedArgs: st.EditedArgs, Signature: &messages.ResumeSignature{Approver: approver, Signature: sig}}
	var out messages.Resumed
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := cl.do(ctx, http.MethodPost, "/api/v1/interrupts/"+url.PathEscape(id)+"/resume", res, &out); err != nil {
		return failure(err)
	}
	n := 0
	for _, s := range out.Signed {
		if s.Decision == d {
			n++
		}
	}
	need := in.Approval.Required
	if d == messages.DecisionReject {
		need = in.Approval.RejectRequired
	}
	if out.Status == messages.InterruptPending {
		fmt.Fprintf(c.app.stdout, "%s signed %s of %s: %d of %d signatures; waiting for more\n", approver, d, id, n, need)
	} else {
		fmt.Fprintf(c.app.stdout, "%s signed %s of %s: %d of %d signatures; decided\n", approver, d, id, n, need)
	}
	return nil
}

// fetch reads interrupt id from the server.
func (c *approveCmd) fetch(ctx context.Context, cl *apiClient, id string) (messages.Interrupt, error) {
	var in messages.Interrupt
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	err := cl.do(ctx, http.MethodGet, "/api/v1/interrupts/"+url.PathEscape(id), nil, &in)
	return in, err
}

// answerChoice answers a choice question: it shows the numbered options,
// takes --choose or asks on stdin (or declines with --decision reject),
// and sends the answer, which needs no signature.
func (c *approveCmd) answerChoice(ctx context.Context, cl *apiClient, in messages.Interrupt) error {
	p := in.InterruptRaisedPayload
	fmt.Fprintf(c.app.stderr, "%s asks you to choose: %s\n", in.AgentID, p.Question)
	if p.ContextSnippet != "" {
		fmt.Fprintf(c.app.stderr, "  context: %s\n", shorten(p.ContextSnippet))
	}
	writeChoiceOptions(c.app.stderr, p)
	var res messages.Resume
	switch {
	case c.choose != "":
		var ok bool
		if res, ok = choiceAnswer(p, c.choose); !ok || res.Decision == messages.DecisionReject {
			return usageError(fmt.Errorf("--choose %q names no option", c.choose))
		}
	case messages.Decision(c.decision) == messages.DecisionReject:
		res = messages.Resume{Decision: messages.DecisionReject}
	default:
		fmt.Fprint(c.app.stderr, choicePrompt(p))
		lr := newLineReader(c.app.stdin)
		defer lr.close()
		stop := context.AfterFunc(ctx, lr.cancel)
		defer stop()
		line, err := lr.line(time.Time{})
		if err != nil {
			fmt.Fprintln(c.app.stderr)
			return failure(fmt.Errorf("no answer (pass --choose to answer without asking): %w", err))
		}
		var ok bool
		if res, ok = choiceAnswer(p, line); !ok {
			return failure(fmt.Errorf("%q names no option", strings.TrimSpace(line)))
		}
	}
	var out messages.Resumed
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := cl.do(ctx, http.MethodPost, "/api/v1/interrupts/"+url.PathEscape(p.InterruptID)+"/resume", res, &out); err != nil {
		return failure(err)
	}
	if res.Decision == messages.DecisionReject {
		fmt.Fprintf(c.app.stdout, "declined the choice %s\n", p.InterruptID)
	} else {
		fmt.Fprintf(c.app.stdout, "chose %s for %s\n", chosenLabels(p, res.Choices), p.InterruptID)
	}
	return nil
}

// errNotSigned: the approver did not say yes.
var errNotSigned = errors.New("not signed")

// confirm asks question on stderr and reads the answer from stdin: y or
// yes (any case) goes on, anything else, or no answer, is errNotSigned.
// The read ends when ctx does (Ctrl-C).
func (c *approveCmd) confirm(ctx context.Context, question string) error {
	fmt.Fprint(c.app.stderr, question)
	lr := newLineReader(c.app.stdin)
	defer lr.close()
	stop := context.AfterFunc(ctx, lr.cancel)
	defer stop()
	answer, err := lr.line(time.Time{})
	if err != nil {
		fmt.Fprintln(c.app.stderr)
		return fmt.Errorf("%w: no answer (pass --yes to sign without asking)", errNotSigned)
	}
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return nil
	}
	return fmt.Errorf("%w: you answered %q", errNotSigned, answer)
}

// showEvidence writes what an approver decides on: the evidence package
// (title, risk, narrative, reasoning, the options and their
// consequences), what the interrupt is about (the tool call, the node,
// the plan's size) and the signatures the policy needs.
func showEvidence(w io.Writer, in messages.Interrupt) {
	p := in.InterruptRaisedPayload
	if ev := p.Evidence; ev != nil {
		fmt.Fprintf(w, "%s [%s risk]\n%s\n", ev.Title, ev.RiskLevel, ev.Narrative)
		if len(ev.ReasoningTrace) > 0 {
			fmt.Fprintln(w, "Reasoning:")
			for _, step := range ev.ReasoningTrace {
				fmt.Fprintf(w, "  - %s\n", step)
			}
		}
		if len(ev.RecommendedActions) > 0 {
			fmt.Fprintln(w, "Options:")
			for i, a := range ev.RecommendedActions {
				mark := ""
				if i == 0 {
					mark = " (recommended)"
				}
				fmt.Fprintf(w, "  %s: %s%s\n", a.Decision, a.Label, mark)
				for _, c := range a.Consequences {
					fmt.Fprintf(w, "      then %s\n", c)
				}
			}
		}
	}
	switch {
	case p.ToolName != "":
		fmt.Fprintf(w, "Tool call: %s %s\n", p.ToolName, p.ToolArgs)
	case p.NodeID != "":
		fmt.Fprintf(w, "Node: %s %s\n", p.NodeID, p.Goal)
	case p.Plan != nil:
		fmt.Fprintf(w, "Plan: %s\n", nodesInWaves(len(p.Plan.Nodes), len(p.Waves)))
	}
	a := p.Approval
	fmt.Fprintf(w, "Policy: %d of %s to approve, %d to reject", a.Required, plural(len(a.Approvers), "approver", "approvers"), a.RejectRequired)
	if len(in.Signed) > 0 {
		names := make([]string, len(in.Signed))
		for i, s := range in.Signed {
			names[i] = s.Approver + " (" + string(s.Decision) + ")"
		}
		fmt.Fprintf(w, "; signed so far: %s", strings.Join(names, ", "))
	}
	fmt.Fprintf(w, "; expires %s\n", in.ExpiresAt.UTC().Format(time.RFC3339))
}

// apiClient calls the conclave HTTP API.
type apiClient struct {
	base  *url.URL
	token string
}

// do sends a JSON request and decodes a JSON answer; an API error becomes
// an error with the server's message.
func (c *apiClient) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base.JoinPath(path).String(), rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var e messages.ErrorBody
		if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
			return fmt.Errorf("%s %s: %d %s: %s", method, path, resp.StatusCode, e.Error.Code, e.Error.Message)
		}
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	return json.Unmarshal(b, out)
}

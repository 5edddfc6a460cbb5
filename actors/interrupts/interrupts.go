// Package interrupts is the registry of human-in-the-loop interrupts. It is
// the single arbiter of how each interrupt ends, exactly once: a human's
// resume, its timeout, or the cancellation of its run or agent. The parked
// actor learns the outcome through the Deliver function it registered.
//
// States: pending → resolving (a resume was accepted and is being applied
// by the parked actor) → resolved; pending → expired; pending → cancelled.
// A resume of an unknown or another tenant's interrupt is ErrNotFound; of
// a resolving one ErrConflict; of a resolved or cancelled one ErrResolved
// (which is an ErrConflict: the losers of concurrent resumes get the same
// answer whether they come before or after the winner is applied); of an
// expired one ErrExpired. Ended interrupts are remembered for TombstoneTTL
// (at most MaxTombstones of them) to answer so; after that they are
// unknown. A resume that lacks what its kind needs is an *InvalidError and
// leaves the interrupt pending.
//
// A policy-covered interrupt (governance) is raised with a Signing: a
// resume must then carry an approver's signature of its decision, which
// the registry verifies and counts under its lock (so concurrent
// submissions are each counted once); the interrupt stays pending until
// a decision has the signatures it needs. A refused signature is a
// *SignatureError and changes nothing.
package interrupts

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/conclave-ai/conclave/actors/dag"
	"github.com/conclave-ai/conclave/governance"
	"github.com/conclave-ai/conclave/messages"
)

// Errors.
var (
	ErrNotFound = errors.New("interrupts: interrupt not found or already resolved")
	ErrConflict = errors.New("interrupts: interrupt is being resolved by another request")
	ErrExpired  = errors.New("interrupts: interrupt expired")
	// ErrResolved matches ErrConflict too (errors.Is).
	ErrResolved error = resolvedError{}
)

type resolvedError struct{}

func (resolvedError) Error() string {
	return "interrupts: interrupt already answered, or cancelled with its run"
}
func (resolvedError) Is(target error) bool { return target == ErrConflict }

// How long, and how many, ended interrupts are remembered so that a late
// resume is told what happened instead of "not found". Ten minutes covers
// a human's retry; the count bounds the memory (about 100 bytes each).
const (
	TombstoneTTL  = 10 * time.Minute
	MaxTombstones = 100_000
)

// SignatureError is a signature the registry refused (Err is one of
// governance's errors, or the error of recording it).
type SignatureError struct{ Err error }

func (e *SignatureError) Error() string { return "interrupts: signature refused: " + e.Err.Error() }
func (e *SignatureError) Unwrap() error { return e.Err }

// Signing makes an interrupt need signatures (governance).
type Signing struct {
	// Tally verifies and counts the signatures (those recorded before a
	// restart already restored into it).
	Tally *governance.Tally
	// Digest is the evidence digest statements must name.
	Digest string
	// Record makes a valid signature durable and visible (its
	// approval_signature_added event, the audit log) before it counts; an
	// error refuses it. Refused reports a refused one (a warning event).
	// Both are called without the registry's lock, one at a time per
	// interrupt.
	Record  func(sig governance.Signature, count, required int, full bool) error
	Refused func(approver string, err error)
}

// InvalidError is a resume that does not fit its interrupt's kind.
type InvalidError struct{ Reason string }

func (e *InvalidError) Error() string { return "interrupts: invalid resume: " + e.Reason }

// Deliver hands the outcome to the parked actor. It must not block; it is
// called at most once per interrupt, without the registry's lock held.
type Deliver func(*messages.Resolution)

// Registry holds the interrupts of every session. The zero value is not
// usable; call New.
type Registry struct {
	now func() time.Time

	mu        sync.Mutex // guards everything below
	byID      map[string]*entry
	bySession map[sessionKey][]*entry     // in creation order; ended entries are pruned lazily
	byRun     map[messages.RunID][]*entry // open interrupts of each run
	// stopped holds the runs CancelRun was called for, until ForgetRun:
	// an interrupt such a run raises afterwards (an actor that was about
	// to park when the run was stopped) is cancelled at once, so it cannot
	// hold a parked actor, and the stop queued behind it, until it expires.
	stopped map[messages.RunID]struct{}
	// asleep holds the interrupts of runs put to sleep (Sleep) until their
	// actors park on them again (RaiseAt).
	asleep map[string]*sleeper
	// ended are tombstones of ended interrupts, oldest first in
	// endedQ[endedHead:].
	ended     map[string]tombstone
	endedQ    []tombstoneRef
	endedHead int
}

type tombstone struct {
	tenant messages.TenantID
	status messages.InterruptStatus
	// expired is the interrupt as it ended, kept for Get when it timed
	// out (clients ask whether theirs expired); nil otherwise.
	expired *messages.Interrupt
}

type tombstoneRef struct {
	id string
	at time.Time
}

type sessionKey struct {
	tenant  messages.TenantID
	session messages.SessionID
}

type entry struct {
	info    messages.Interrupt
	tenant  messages.TenantID
	action  messages.Decision // what a timeout decides
	deliver Deliver
	timer   *time.Timer
	signing *Signing   // set for a policy-covered interrupt
	signMu  sync.Mutex // one signature at a time: verify, record, count
	// journaled: its interrupt_raised is in the journal (Journaled, or
	// raised with a seq): only then is it listed.
	journaled bool
}

// New returns an empty registry.
func New(now func() time.Time) *Registry {
	return &Registry{now: now, byID: map[string]*entry{}, bySession: map[sessionKey][]*entry{}, byRun: map[messages.RunID][]*entry{},
		stopped: map[messages.RunID]struct{}{}, ended: map[string]tombstone{}, asleep: map[string]*sleeper{}}
}

// Raise registers a pending interrupt. After timeout (> 0) it expires and
// deliver receives a Resolution with Expired set and Decision =
// TimeoutDecision (action, unless the interrupt needs signatures).
// info's payload is shared, not copied: it must not change afterwards.
func (r *Registry) Raise(tenant messages.TenantID, info messages.Interrupt, timeout time.Duration, action messages.Decision, deliver Deliver) {
	created := r.now().UTC()
	r.RaiseAt(tenant, info, created, created.Add(timeout), action, deliver, nil)
}

// RaiseAt registers an interrupt raised at created that expires at expires
// (an interrupt recovered from the journal after a restart). One already
// past its expiry expires at once. signing, when set, makes the interrupt
// need signatures.
func (r *Registry) RaiseAt(tenant messages.TenantID, info messages.Interrupt, created, expires time.Time, action messages.Decision, deliver Deliver, signing *Signing) {
	if r.wakeUp(info.InterruptID, deliver) {
		return
	}
	timeout := expires.Sub(r.now())
	e := &entry{info: info, tenant: tenant, action: action, deliver: deliver, signing: signing, journaled: info.Seq != 0}
	if signing != nil {
		e.info.Signed = signedBy(signing.Tally)
	}
	e.info.Status = messages.InterruptPending
	e.info.CreatedAt = created.UTC()
	e.info.ExpiresAt = expires.UTC()
	r.mu.Lock()
	if _, stopped := r.stopped[info.RunID]; stopped {
		e.info.Status = messages.InterruptCancelled
		r.tombstoneLocked(e) // a resume of it is told it was cancelled, like any other
		r.mu.Unlock()
		deliver(&messages.Resolution{Resume: messages.Resume{InterruptID: info.InterruptID, Decision: messages.DecisionCancel}, Kind: info.Kind, Cancelled: true})
		return
	}
	r.byID[info.InterruptID] = e
	k := sessionKey{tenant, info.SessionID}
	r.bySession[k] = append(r.bySession[k], e)
	r.byRun[info.RunID] = append(r.byRun[info.RunID], e)
	if !expires.IsZero() {
		e.timer = time.AfterFunc(max(timeout, 0), func() { r.expire(e) })
	}
	r.mu.Unlock()
}

// Close stops every timer; nothing is delivered afterwards.
func (r *Registry) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.byID {
		if e.timer != nil {
			e.timer.Stop()
		}
		e.deliver = func(*messages.Resolution) {}
	}
}

func (r *Registry) expire(e *entry) {
	r.mu.Lock()
	if e.info.Status != messages.InterruptPending {
		r.mu.Unlock()
		return
	}
	e.info.Status = messages.InterruptTimedOut
	deliver := e.deliver
	r.endLocked(e)
	r.mu.Unlock()
	action := TimeoutDecision(e.info.Kind, e.signing != nil || e.info.Approval != nil, e.action)
	deliver(&messages.Resolution{
		Resume: messages.Resume{InterruptID: e.info.InterruptID, Decision: action},
		Kind:   e.info.Kind, Expired: true,
	})
}

// TimeoutDecision is what an interrupt's expiry decides, given what its
// run asked for (action): the one rule, used to announce it
// (interrupt_raised's timeout_action) and to take it.
//
//   - An info request is rejected: nobody answered, approving has no
//     meaning.
//   - A choice is rejected: a timer never picks an option for a human.
//   - A policy-covered interrupt (signed: it needs approvers' signatures)
//     is rejected whatever the run asked for: a timer never takes a
//     decision that needs signatures, so a default cannot grant what the
//     policy forbids (docs/governance.md).
//   - Otherwise the run's action (reject when it asked for none).
func TimeoutDecision(kind messages.InterruptKind, signed bool, action messages.Decision) messages.Decision {
	if kind == messages.InterruptInfoRequest || kind == messages.InterruptChoice || signed || action == "" {
		return messages.DecisionReject
	}
	return action
}

// Resolve applies a human's answer. On success the parked actor receives
// it and the interrupt is resolving until the actor calls Done. For a
// policy-covered interrupt the answer is one approver's signed decision:
// it is verified and counted; until a decision has the signatures it
// needs, the interrupt stays pending (the returned info lists Signed).
func (r *Registry) Resolve(res messages.Resume) (messages.Interrupt, error) {
	r.mu.Lock()
	if e, ok := r.byID[res.InterruptID]; ok && e.signing != nil && e.tenant == res.Tenant {
		r.mu.Unlock()
		return r.resolveSigned(e, res)
	}
	e, ok := r.byID[res.InterruptID]
	if !ok {
		ts, ok := r.ended[res.InterruptID]
		r.mu.Unlock()
		switch {
		case !ok || ts.tenant != res.Tenant:
			return messages.Interrupt{}, ErrNotFound
		case ts.status == messages.InterruptTimedOut:
			return messages.Interrupt{}, ErrExpired
		default:
			return messages.Interrupt{}, ErrResolved
		}
	}
	if e.tenant != res.Tenant {
		r.mu.Unlock()
		return messages.Interrupt{}, ErrNotFound
	}
	if e.info.Status == messages.InterruptResolving {
		r.mu.Unlock()
		return messages.Interrupt{}, ErrConflict
	}
	if err := ValidateFor(e.info.InterruptRaisedPayload, &res); err != nil {
		r.mu.Unlock()
		return messages.Interrupt{}, err
	}
	e.info.Status = messages.InterruptResolving
	if e.timer != nil {
		e.timer.Stop()
	}
	info, deliver := e.info, e.deliver
	r.mu.Unlock()
	deliver(&messages.Resolution{Resume: res, Kind: info.Kind})
	return info, nil
}

// resolveSigned counts one approver's signed decision of e.
func (r *Registry) resolveSigned(e *entry, res messages.Resume) (messages.Interrupt, error) {
	if res.Signature == nil {
		return messages.Interrupt{}, &InvalidError{Reason: "this interrupt's decision needs approvers' signatures: sign the statement " +
			"{interrupt_id, evidence_digest, decision, edited_args} (docs/governance.md) and send it as signature {approver, signature}"}
	}
	if e.info.Kind != messages.InterruptToolApproval && res.Decision == messages.DecisionRevise {
		return messages.Interrupt{}, &InvalidError{Reason: fmt.Sprintf("a signed %s is approved or rejected; revise is not signable", e.info.Kind)}
	}
	if err := ValidateFor(e.info.InterruptRaisedPayload, &res); err != nil {
		return messages.Interrupt{}, err
	}
	e.signMu.Lock() // verify, record and count one signature at a time
	defer e.signMu.Unlock()
	r.mu.Lock()
	if err := r.openLocked(e, res.Tenant); err != nil {
		r.mu.Unlock()
		return messages.Interrupt{}, err
	}
	r.mu.Unlock()
	s := e.signing
	st := messages.ApprovalStatement{InterruptID: e.info.InterruptID, EvidenceDigest: s.Digest, Decision: res.Decision, EditedArgs: res.EditedArgs}
	count, decided, err := s.Tally.Add(res.Signature.Approver, st, res.Signature.Signature)
	if err == nil {
		sig := governance.Signature{Approver: res.Signature.Approver, Statement: st, Signature: res.Signature.Signature}
		if err = s.Record(sig, count, s.Tally.Required(st.Decision), decided); err != nil {
			s.Tally.Remove(res.Signature.Approver)
		}
	}
	if err != nil {
		if s.Refused != nil {
			s.Refused(res.Signature.Approver, err)
		}
		return messages.Interrupt{}, &SignatureError{Err: err}
	}
	r.mu.Lock()
	if err := r.openLocked(e, res.Tenant); err != nil { // it expired or was cancelled meanwhile
		r.mu.Unlock()
		return messages.Interrupt{}, err
	}
	e.info.Signed = signedBy(s.Tally)
	if !decided {
		info := e.info
		r.mu.Unlock()
		return info, nil
	}
	e.info.Status = messages.InterruptResolving
	if e.timer != nil {
		e.timer.Stop()
	}
	info, deliver := e.info, e.deliver
	r.mu.Unlock()
	deliver(&messages.Resolution{Resume: res, Kind: info.Kind, Signers: s.Tally.Signers(st)})
	return info, nil
}

// openLocked reports why e can no longer be answered, if it cannot. Must
// be called with r.mu held.
func (r *Registry) openLocked(e *entry, tenant messages.TenantID) error {
	if r.byID[e.info.InterruptID] == e && e.info.Status == messages.InterruptPending {
		return nil
	}
	ts, ok := r.ended[e.info.InterruptID]
	switch {
	case e.info.Status == messages.InterruptResolving:
		return ErrConflict
	case !ok || ts.tenant != tenant:
		return ErrNotFound
	case ts.status == messages.InterruptTimedOut:
		return ErrExpired
	}
	return ErrResolved
}

// signedBy lists a tally's signatures as the API shows them.
func signedBy(t *governance.Tally) []messages.SignedBy {
	var out []messages.SignedBy
	for _, s := range t.Signatures() {
		out = append(out, messages.SignedBy{Approver: s.Approver, Decision: s.Statement.Decision})
	}
	return out
}

// Done marks a resolving interrupt resolved: the parked actor applied the
// answer. Later resumes get ErrNotFound.
func (r *Registry) Done(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.byID[id]; ok && e.info.Status == messages.InterruptResolving {
		e.info.Status = messages.InterruptAnswered
		r.endLocked(e)
	}
}

// Cancel ends a pending interrupt because its agent or run stopped; the
// parked actor receives a Resolution with Cancelled set. It reports
// whether the interrupt was pending. One being resolved (its resolution
// already sent to an actor that is now stopping, and may never run) is
// ended too, without a second delivery, so it cannot stay listed forever.
func (r *Registry) Cancel(id string) bool {
	r.mu.Lock()
	e, ok := r.byID[id]
	if ok && e.info.Status == messages.InterruptResolving {
		e.info.Status = messages.InterruptCancelled
		r.endLocked(e)
	}
	if !ok || e.info.Status != messages.InterruptPending {
		r.mu.Unlock()
		return false
	}
	e.info.Status = messages.InterruptCancelled
	deliver := e.deliver
	r.endLocked(e)
	r.mu.Unlock()
	deliver(&messages.Resolution{Resume: messages.Resume{InterruptID: id, Decision: messages.DecisionCancel}, Kind: e.info.Kind, Cancelled: true})
	return true
}

// CancelRun cancels every pending interrupt of run, and every one it
// raises until ForgetRun.
func (r *Registry) CancelRun(run messages.RunID) {
	r.mu.Lock()
	r.stopped[run] = struct{}{}
	var ids []string
	for _, e := range r.byRun[run] {
		ids = append(ids, e.info.InterruptID)
	}
	r.mu.Unlock()
	for _, id := range ids {
		r.Cancel(id)
	}
}

// ForgetRun ends what CancelRun started: call it once run has ended.
func (r *Registry) ForgetRun(run messages.RunID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.stopped, run)
}

// endLocked forgets an interrupt that can no longer be answered, keeping
// a tombstone so that a late resume says what happened. Must be called
// with r.mu held.
func (r *Registry) endLocked(e *entry) {
	if e.timer != nil {
		e.timer.Stop()
	}
	e.deliver = nil
	id := e.info.InterruptID
	delete(r.byID, id)
	open := slices.DeleteFunc(r.byRun[e.info.RunID], func(x *entry) bool { return x == e })
	if len(open) == 0 {
		delete(r.byRun, e.info.RunID)
	} else {
		r.byRun[e.info.RunID] = open
	}
	k := sessionKey{e.tenant, e.info.SessionID}
	if list := slices.DeleteFunc(r.bySession[k], func(x *entry) bool { return x == e }); len(list) == 0 {
		delete(r.bySession, k)
	} else {
		r.bySession[k] = list
	}
	r.tombstoneLocked(e)
}

// tombstoneLocked remembers an ended interrupt (see TombstoneTTL) and
// forgets the oldest beyond the bounds. Must be called with r.mu held.
func (r *Registry) tombstoneLocked(e *entry) {
	id := e.info.InterruptID
	now := r.now()
	ts := tombstone{tenant: e.tenant, status: e.info.Status}
	if e.info.Status == messages.InterruptTimedOut {
		info := e.info
		ts.expired = &info
	}
	r.ended[id] = ts
	r.endedQ = append(r.endedQ, tombstoneRef{id: id, at: now})
	for r.endedHead < len(r.endedQ) && (len(r.endedQ)-r.endedHead > MaxTombstones || now.Sub(r.endedQ[r.endedHead].at) > TombstoneTTL) {
		delete(r.ended, r.endedQ[r.endedHead].id)
		r.endedQ[r.endedHead] = tombstoneRef{}
		r.endedHead++
	}
	if r.endedHead > len(r.endedQ)/2 { // compact: amortised O(1) per tombstone
		r.endedQ = append(r.endedQ[:0], r.endedQ[r.endedHead:]...)
		r.endedHead = 0
	}
}

// Get returns an open interrupt of tenant, or one that expired less than
// TombstoneTTL ago (status timed_out).
func (r *Registry) Get(tenant messages.TenantID, id string) (messages.Interrupt, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.byID[id]; ok && e.tenant == tenant && e.journaled {
		return e.info, true
	}
	if ts, ok := r.ended[id]; ok && ts.tenant == tenant && ts.expired != nil {
		return *ts.expired, true
	}
	return messages.Interrupt{}, false
}

// Pending lists the open (pending or resolving) interrupts of a session in
// the order they were raised, after the interrupt id after ("" from the
// start), at most limit, with the cursor of the next page.
func (r *Registry) Pending(tenant messages.TenantID, session messages.SessionID, after string, limit int) ([]messages.Interrupt, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := sessionKey{tenant, session}
	list := r.bySession[k][:0:0]
	for _, e := range r.bySession[k] { // prune ended entries while listing
		if e.info.Status == messages.InterruptPending || e.info.Status == messages.InterruptResolving {
			list = append(list, e)
		}
	}
	r.bySession[k] = list
	list = slices.DeleteFunc(slices.Clone(list), func(e *entry) bool { return !e.journaled })
	start := 0
	if after != "" {
		start = len(list)
		for i, e := range list {
			if e.info.InterruptID == after {
				start = i + 1
				break
			}
		}
	}
	var out []messages.Interrupt
	for _, e := range list[start:] {
		if len(out) == limit {
			return out, out[len(out)-1].InterruptID
		}
		out = append(out, e.info)
	}
	return out, ""
}

// PendingAll lists the open interrupts of every session of a tenant,
// oldest first (by creation time, then id), after cursor ("" from the
// start), at most limit, with the cursor of the next page ("" at the end).
// A cursor is "<created_at unix nanoseconds>.<interrupt id>", so a page
// goes on where the last one ended even if that interrupt was resolved
// since. A malformed cursor is an *InvalidError.
func (r *Registry) PendingAll(tenant messages.TenantID, cursor string, limit int) ([]messages.Interrupt, string, error) {
	var after struct {
		at int64
		id string
	}
	if cursor != "" {
		at, id, ok := strings.Cut(cursor, ".")
		n, err := strconv.ParseInt(at, 10, 64)
		if !ok || err != nil || id == "" {
			return nil, "", &InvalidError{Reason: "cursor: not a cursor of this list (<unix nanoseconds>.<interrupt id>)"}
		}
		after.at, after.id = n, id
	}
	r.mu.Lock()
	var open []messages.Interrupt
	for k, list := range r.bySession {
		if k.tenant != tenant {
			continue
		}
		for _, e := range list {
			if e.info.Status != messages.InterruptPending && e.info.Status != messages.InterruptResolving || !e.journaled {
				continue
			}
			if at := e.info.CreatedAt.UnixNano(); cursor != "" && (at < after.at || at == after.at && e.info.InterruptID <= after.id) {
				continue
			}
			open = append(open, e.info)
		}
	}
	r.mu.Unlock()
	slices.SortFunc(open, compareOpen)
	if len(open) <= limit {
		return open, "", nil
	}
	open = open[:limit]
	return open, pageCursor(open[limit-1]), nil
}

// compareOpen is PendingAll's order: creation time, then id.
func compareOpen(a, b messages.Interrupt) int {
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(a.InterruptID, b.InterruptID)
}

// pageCursor is PendingAll's cursor that goes on after in.
func pageCursor(in messages.Interrupt) string {
	return strconv.FormatInt(in.CreatedAt.UnixNano(), 10) + "." + in.InterruptID
}

// MergePages merges pages of PendingAll that several registries (the
// nodes of a cluster, each holding some sessions) gave for the same
// tenant, cursor and limit into the page one registry holding all of
// their interrupts would have given: the first limit of them in
// PendingAll's order, and the cursor of the next page ("" when no page
// had more). An interrupt listed twice (a session changing owner while
// the pages were taken) is listed once.
func MergePages(limit int, pages ...messages.InterruptList) messages.InterruptList {
	var all []messages.Interrupt
	more := false
	for _, p := range pages {
		all = append(all, p.Interrupts...)
		more = more || p.NextCursor != ""
	}
	slices.SortFunc(all, compareOpen)
	all = slices.CompactFunc(all, func(a, b messages.Interrupt) bool { return a.InterruptID == b.InterruptID })
	if len(all) > limit {
		all, more = all[:limit], true
	}
	out := messages.InterruptList{Interrupts: all}
	if more && len(all) > 0 {
		out.NextCursor = pageCursor(all[len(all)-1])
	}
	return out
}

// Journaled records that the interrupt_raised events among envs are in
// the journal: from now on the registry lists them (Pending, PendingAll,
// Get). Until then an interrupt is registered (its resolution can be taken)
// but not listed: a crash would lose it, and its agent would ask again
// under a new id.
func (r *Registry) Journaled(envs []*messages.Envelope) {
	locked := false // most batches raise nothing: no lock for them
	for _, env := range envs {
		p, ok := env.Payload.(*messages.InterruptRaisedPayload)
		if !ok {
			continue
		}
		if !locked {
			r.mu.Lock()
			defer r.mu.Unlock()
			locked = true
		}
		if e := r.byID[p.InterruptID]; e != nil {
			e.journaled, e.info.Seq = true, env.Seq
		}
	}
}

// Validate checks that res carries what an interrupt of kind needs, and
// normalises it (an info request's decision is approve).
func Validate(kind messages.InterruptKind, res *messages.Resume) error {
	decision := func(allowRevise bool) error {
		switch res.Decision {
		case messages.DecisionApprove, messages.DecisionReject:
			return nil
		case messages.DecisionRevise:
			if allowRevise {
				return nil
			}
			return &InvalidError{Reason: fmt.Sprintf("decision revise is not possible for a %s; use approve or reject", kind)}
		case "":
			return &InvalidError{Reason: fmt.Sprintf("a %s needs a decision: approve or reject", kind)}
		default:
			return &InvalidError{Reason: fmt.Sprintf("decision %q is not one of approve, reject, revise", res.Decision)}
		}
	}
	switch kind {
	case messages.InterruptToolApproval:
		if err := decision(true); err != nil {
			return err
		}
		if res.Decision == messages.DecisionRevise {
			var obj map[string]json.RawMessage
			if len(res.EditedArgs) == 0 || json.Unmarshal(res.EditedArgs, &obj) != nil {
				return &InvalidError{Reason: "decision revise needs edited_args: the tool's full replacement arguments, a JSON object"}
			}
		}
	case messages.InterruptInfoRequest:
		if res.Response == "" {
			return &InvalidError{Reason: "an info_request needs a non-empty response"}
		}
		res.Decision = messages.DecisionApprove
	case messages.InterruptPlanApproval:
		if err := decision(true); err != nil {
			return err
		}
		if res.Decision == messages.DecisionRevise {
			if res.Plan == nil {
				return &InvalidError{Reason: "decision revise needs plan: the edited plan"}
			}
			if err := dag.Validate(*res.Plan); err != nil {
				return &InvalidError{Reason: err.Error()}
			}
		}
	case messages.InterruptNodeApproval, messages.InterruptSpawnApproval:
		return decision(false)
	case messages.InterruptChoice:
		// A human may decline to choose (decision reject, no choices);
		// otherwise the answer names at least one option.
		switch {
		case res.Decision == messages.DecisionReject && len(res.Choices) == 0:
		case res.Decision == messages.DecisionReject:
			return &InvalidError{Reason: "a declined choice (decision reject) names no choices"}
		case res.Decision != "" && res.Decision != messages.DecisionApprove:
			return &InvalidError{Reason: fmt.Sprintf("decision %q is not possible for a choice: send choices, or decision reject to decline", res.Decision)}
		case len(res.Choices) == 0:
			return &InvalidError{Reason: "a choice needs choices: the chosen option ids (or decision reject to decline)"}
		default:
			res.Decision = messages.DecisionApprove
		}
	default:
		return &InvalidError{Reason: fmt.Sprintf("unknown interrupt kind %q", kind)}
	}
	return nil
}

// ValidateFor is Validate for the interrupt raised: it also checks a
// choice's answer against the options offered (known ids, one for a
// single choice, none twice).
func ValidateFor(raised *messages.InterruptRaisedPayload, res *messages.Resume) error {
	if err := Validate(raised.Kind, res); err != nil {
		return err
	}
	if raised.Kind == messages.InterruptChoice && res.Decision == messages.DecisionApprove {
		if err := raised.Choice().Check(res.Choices); err != nil {
			return &InvalidError{Reason: err.Error()}
		}
	}
	return nil
}

// sleeper is an interrupt of a run put to sleep: its outcome, once
// decided, waits here for the actor that parks on it again.
type sleeper struct {
	res     *messages.Resolution // decided while asleep; nil if not yet
	rebound Deliver              // the actor that parked on it again
}

// Sleep puts run's pending interrupts to sleep: its actors are about to
// stop without a word (the run is rebuilt from its journal when it is
// needed again). Each interrupt stays pending, listed and answerable,
// and keeps its timer; an outcome decided while it sleeps (an answer,
// its timeout, its cancellation) is kept and wake is called (without the
// lock held, possibly more than once), and the actor that parks on it
// again with RaiseAt receives it then.
//
// It refuses (false), changing nothing, unless exactly want interrupts of
// run are pending, none is being resolved or needs signatures, and all
// are journaled: then no outcome is on its way to an actor, and every
// interrupt is in the journal the run is rebuilt from.
func (r *Registry) Sleep(run messages.RunID, want int, wake func()) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	open := r.byRun[run]
	if _, stopped := r.stopped[run]; stopped || want == 0 || len(open) != want {
		return false
	}
	for _, e := range open {
		// A signed interrupt records each signature through the actor's
		// run (Signing.Record), which is gone while it sleeps: such runs
		// stay awake.
		if e.info.Status != messages.InterruptPending || !e.journaled || e.signing != nil {
			return false
		}
	}
	for _, e := range open {
		sl := &sleeper{}
		r.asleep[e.info.InterruptID] = sl
		e.deliver = func(res *messages.Resolution) {
			r.mu.Lock()
			if d := sl.rebound; d != nil { // parked again meanwhile: it is the one to tell
				r.mu.Unlock()
				d(res)
				return
			}
			sl.res = res
			r.mu.Unlock()
			wake()
		}
	}
	return true
}

// wakeUp gives a sleeping interrupt (Sleep) to the actor that parks on it
// again: the interrupt goes on as it was (same entry, timer and
// signatures), and an outcome decided while it slept is delivered now.
// It reports false if id is not asleep.
func (r *Registry) wakeUp(id string, deliver Deliver) bool {
	r.mu.Lock()
	sl := r.asleep[id]
	if sl == nil {
		r.mu.Unlock()
		return false
	}
	delete(r.asleep, id)
	res := sl.res
	if res == nil {
		sl.rebound = deliver // an outcome still on its way to the sleeper goes to deliver
		if e := r.byID[id]; e != nil {
			e.deliver = deliver
		}
		r.mu.Unlock()
		return true
	}
	if e := r.byID[id]; e != nil { // being resolved: Done comes from deliver's actor
		e.deliver = deliver
	}
	r.mu.Unlock()
	deliver(res)
	return true
}

// PendingByKind counts the pending interrupts (waiting for an answer,
// asleep ones included), by kind.
func (r *Registry) PendingByKind() map[messages.InterruptKind]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := map[messages.InterruptKind]int{}
	for _, e := range r.byID {
		if e.info.Status == messages.InterruptPending {
			n[e.info.Kind]++
		}
	}
	return n
}

// Asleep is how many interrupts are asleep (Sleep) and not parked on
// again.
func (r *Registry) Asleep() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.asleep)
}

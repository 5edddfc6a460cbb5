package transport

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/actors/runindex"
	"github.com/conclave-ai/conclave/messages"
)

// Page sizes of the list endpoints (GET /api/v1/runs, /api/v1/interrupts).
const (
	defaultPage = messages.DefaultPageLimit
	maxPage     = messages.MaxPageLimit
)

// engineTimeout bounds one call into the engine from a request.
const engineTimeout = 10 * time.Second

// createRun: POST /api/v1/runs with a messages.StartRun body.
func (s *Server) createRun(w http.ResponseWriter, r *http.Request, tenant messages.TenantID) {
	body, aerr := readBody(w, r, s.cfg.MaxBody)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	requestID := r.Header.Get("X-Request-Id")
	switch {
	case requestID == "":
		requestID = s.cfg.NewID().String()
	case !messages.ValidRequestID(requestID):
		writeError(w, errorf(http.StatusBadRequest, codeBadRequest, fmt.Sprintf("X-Request-Id must be 1..%d printable ASCII characters without spaces", messages.MaxRequestIDBytes)))
		return
	}
	w.Header().Set("X-Request-Id", requestID)
	create := func() (messages.RunCreated, *apiError) {
		var cmd messages.StartRun
		if aerr := decodeStrict(body, &cmd); aerr != nil {
			return messages.RunCreated{}, aerr
		}
		cmd.Tenant, cmd.RequestID = tenant, requestID
		cmd.TraceParent = r.Header.Get("Traceparent") // the run's trace continues the caller's
		// Not cancelled with the request: a client that gives up while the
		// run's start is being acknowledged must not turn a started run
		// into an error (its retry with the same Idempotency-Key would
		// then start a second run).
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), engineTimeout)
		defer cancel()
		ref, err := s.engine.StartRun(ctx, cmd)
		if err != nil {
			return messages.RunCreated{}, engineError(err)
		}
		return s.runCreated(r, ref), nil
	}
	key := r.Header.Get("Idempotency-Key")
	var created messages.RunCreated
	replayed := false
	switch {
	case key == "":
		created, aerr = create()
	case len(key) > MaxIdempotencyKey:
		aerr = errorf(http.StatusBadRequest, codeBadRequest, "Idempotency-Key is longer than 255 characters")
	default:
		created, replayed, aerr = s.idem.do(tenant, key, body, create)
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.Header().Set("Location", "/api/v1/runs/"+url.PathEscape(string(created.RunID)))
	writeJSON(w, http.StatusCreated, created)
}

func (s *Server) runCreated(r *http.Request, ref actors.RunRef) messages.RunCreated {
	scheme, wsScheme := "http", "ws"
	if r.TLS != nil {
		scheme, wsScheme = "https", "wss"
	}
	q := "?session_id=" + url.QueryEscape(string(ref.SessionID))
	return messages.RunCreated{
		RunID: ref.RunID, SessionID: ref.SessionID,
		StreamURL: scheme + "://" + r.Host + "/api/v1/events/stream" + q,
		WSURL:     wsScheme + "://" + r.Host + "/api/v1/events/ws" + q,
	}
}

// listRuns: GET /api/v1/runs?session_id=&status=&limit=&cursor=
func (s *Server) listRuns(w http.ResponseWriter, r *http.Request, tenant messages.TenantID) {
	q := r.URL.Query()
	f := runindex.Filter{Tenant: tenant, Limit: defaultPage}
	if v := q.Get("session_id"); v != "" {
		id, err := messages.NewSessionID(v)
		if err != nil {
			writeError(w, errorf(http.StatusBadRequest, codeBadRequest, err.Error()))
			return
		}
		f.Session = id
	}
	if v := q.Get("status"); v != "" {
		st, err := messages.ParseRunStatus(v)
		if err != nil {
			writeError(w, errorf(http.StatusBadRequest, codeBadRequest, err.Error()))
			return
		}
		f.Status = st
	}
	var aerr *apiError
	if f.Limit, aerr = pageLimit(q); aerr != nil {
		writeError(w, aerr)
		return
	}
	if v := q.Get("cursor"); v != "" {
		id, err := messages.NewRunID(v)
		if err != nil {
			writeError(w, errorf(http.StatusBadRequest, codeBadRequest, "cursor: "+err.Error()))
			return
		}
		if _, err := s.engine.Run(tenant, id); err != nil {
			writeError(w, errorf(http.StatusBadRequest, codeBadRequest, "cursor does not name a run of yours"))
			return
		}
		f.After = id
	}
	runs, next, err := s.engine.Runs(r.Context(), f)
	if err != nil {
		writeError(w, engineError(err))
		return
	}
	if runs == nil {
		runs = []messages.RunSummary{}
	}
	writeJSON(w, http.StatusOK, messages.RunList{Runs: runs, NextCursor: next})
}

func runIDFrom(r *http.Request) (messages.RunID, *apiError) {
	id, err := messages.NewRunID(r.PathValue("id"))
	if err != nil {
		return "", errorf(http.StatusNotFound, codeNotFound, "run not found")
	}
	return id, nil
}

// getRun: GET /api/v1/runs/{id}
func (s *Server) getRun(w http.ResponseWriter, r *http.Request, tenant messages.TenantID) {
	id, aerr := runIDFrom(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	sum, err := s.engine.Run(tenant, id)
	if err != nil {
		writeError(w, engineError(err))
		return
	}
	writeJSON(w, http.StatusOK, sum)
}

// abortRun: POST /api/v1/runs/{id}/abort. 202: the run is stopping and its
// stream will end with run_error{code:"aborted"}; 409 if it already ended.
// steerRun: POST /api/v1/runs/{id}/steer with {"note"} or {"diff"} (or
// both); 202 with the steering id. The note is applied at the run's next
// wave boundary (steering_applied) or rejected there (steering_rejected).
func (s *Server) steerRun(w http.ResponseWriter, r *http.Request, tenant messages.TenantID) {
	id, aerr := runIDFrom(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	raw, aerr := readBody(w, r, s.cfg.MaxBody)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var cmd messages.Steer
	if aerr := decodeStrict(raw, &cmd.SteerNote); aerr != nil {
		writeError(w, aerr)
		return
	}
	cmd.Tenant, cmd.RunID = tenant, id
	ctx, cancel := context.WithTimeout(r.Context(), engineTimeout)
	defer cancel()
	sid, err := s.engine.Steer(ctx, cmd)
	if err != nil {
		writeError(w, engineError(err))
		return
	}
	writeJSON(w, http.StatusAccepted, messages.SteerAccepted{SteeringID: sid, RunID: id})
}

func (s *Server) abortRun(w http.ResponseWriter, r *http.Request, tenant messages.TenantID) {
	id, aerr := runIDFrom(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var body messages.AbortBody
	if r.ContentLength != 0 {
		raw, aerr := readBody(w, r, s.cfg.MaxBody)
		if aerr == nil && len(raw) > 0 {
			aerr = decodeStrict(raw, &body)
		}
		if aerr != nil {
			writeError(w, aerr)
			return
		}
	}
	if sum, err := s.engine.Run(tenant, id); err == nil && sum.Status.Terminal() {
		writeError(w, errorf(http.StatusConflict, codeConflict, "run already ended ("+string(sum.Status)+")"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), engineTimeout)
	defer cancel()
	if err := s.engine.Abort(ctx, messages.AbortRun{Tenant: tenant, RunID: id, Reason: body.Reason}); err != nil {
		writeError(w, engineError(err))
		return
	}
	sum, _ := s.engine.Run(tenant, id)
	writeJSON(w, http.StatusAccepted, sum)
}

// rewindRun: POST /api/v1/runs/{id}/rewind {wave, note?}. 201 with the new
// run: the same session, the source run's plan, the earlier waves' outputs
// reused, waves from `wave` on run again with the note as steering. 409 if
// the source run has not ended; 422 for a wave it cannot rewind to.
func (s *Server) rewindRun(w http.ResponseWriter, r *http.Request, tenant messages.TenantID) {
	id, aerr := runIDFrom(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	body, aerr := readBody(w, r, s.cfg.MaxBody)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var cmd messages.Rewind
	if aerr := decodeStrict(body, &cmd); aerr != nil {
		writeError(w, aerr)
		return
	}
	cmd.Tenant, cmd.RunID = tenant, id
	ctx, cancel := context.WithTimeout(r.Context(), engineTimeout)
	defer cancel()
	ref, err := s.engine.Rewind(ctx, cmd)
	if err != nil {
		writeError(w, engineError(err))
		return
	}
	created := s.runCreated(r, ref)
	w.Header().Set("Location", "/api/v1/runs/"+url.PathEscape(string(created.RunID)))
	writeJSON(w, http.StatusCreated, created)
}

// pageLimit is a list endpoint's ?limit=: 1..maxPage, defaultPage when
// absent.
func pageLimit(q url.Values) (int, *apiError) {
	v := q.Get("limit")
	if v == "" {
		return defaultPage, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxPage {
		return 0, errorf(http.StatusBadRequest, codeBadRequest, fmt.Sprintf("limit must be an integer in 1..%d", maxPage))
	}
	return n, nil
}

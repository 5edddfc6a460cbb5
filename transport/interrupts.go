package transport

import (
	"errors"
	"net/http"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/governance"
	"github.com/conclave-ai/conclave/messages"
)

// Error codes of the interrupt endpoints.
const (
	codeInterruptConflict = "interrupt_conflict"
	codeInterruptExpired  = "interrupt_expired"
	codeInvalidResume     = "invalid_resume"
	codeSignatureRefused  = "signature_refused"
	codeSignatureTwice    = "signature_duplicate"
)

// resumeError maps the engine's resume errors to API errors.
func resumeError(err error) *apiError {
	var invalid *actors.InvalidResumeError
	var refused *actors.SignatureError
	switch {
	case errors.Is(err, governance.ErrDuplicateApprover):
		return errorf(http.StatusConflict, codeSignatureTwice, err.Error())
	case errors.As(err, &refused):
		return errorf(http.StatusUnprocessableEntity, codeSignatureRefused, err.Error())
	case errors.Is(err, actors.ErrInterruptNotFound):
		return errorf(http.StatusNotFound, codeNotFound, "interrupt not found, or already resolved")
	case errors.Is(err, actors.ErrInterruptResolved):
		return errorf(http.StatusConflict, codeInterruptConflict, "the interrupt was already answered, or cancelled with its run")
	case errors.Is(err, actors.ErrInterruptConflict):
		return errorf(http.StatusConflict, codeInterruptConflict, "another request is resolving this interrupt")
	case errors.Is(err, actors.ErrInterruptExpired):
		return errorf(http.StatusConflict, codeInterruptExpired, "the interrupt expired; its timeout action was taken")
	case errors.As(err, &invalid):
		return errorf(http.StatusUnprocessableEntity, codeInvalidResume, invalid.Reason)
	default:
		return engineError(err)
	}
}

// resume: POST /api/v1/events/resume/{interrupt_id} and
// POST /api/v1/interrupts/{id}/resume. Body: messages.Resume, whose needed
// fields depend on the interrupt's kind.
func (s *Server) resume(w http.ResponseWriter, r *http.Request, tenant messages.TenantID) {
	id := r.PathValue("id")
	body, aerr := readBody(w, r, s.cfg.MaxBody)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var res messages.Resume
	if aerr := decodeStrict(body, &res); aerr != nil {
		writeError(w, aerr)
		return
	}
	res.Tenant, res.InterruptID = tenant, id
	info, err := s.engine.Resume(res)
	if err != nil {
		writeError(w, resumeError(err))
		return
	}
	writeJSON(w, resumedStatus(info), messages.Resumed{InterruptID: id, Status: info.Status, Signed: info.Signed})
}

// resumedStatus is 200 for a resume that decided the interrupt, 202 for a
// signature counted while the decision needs more.
func resumedStatus(info messages.Interrupt) int {
	if info.Status == messages.InterruptPending {
		return http.StatusAccepted
	}
	return http.StatusOK
}

// listInterrupts: GET /api/v1/interrupts[?session_id=…]&cursor=&limit=,
// the polling fallback: the open interrupts of the session, or of every
// session of the caller's tenant, oldest first.
func (s *Server) listInterrupts(w http.ResponseWriter, r *http.Request, tenant messages.TenantID) {
	q := r.URL.Query()
	var session messages.SessionID // none: every session of the tenant
	if q.Has("session_id") {
		var err error
		if session, err = messages.NewSessionID(q.Get("session_id")); err != nil {
			writeError(w, errorf(http.StatusBadRequest, codeBadRequest, "session_id: "+err.Error()))
			return
		}
	}
	limit, aerr := pageLimit(q)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	list, next, err := s.engine.PendingInterrupts(r.Context(), tenant, session, q.Get("cursor"), limit)
	if err != nil {
		writeError(w, engineError(err))
		return
	}
	if list == nil {
		list = []messages.Interrupt{}
	}
	writeJSON(w, http.StatusOK, messages.InterruptList{Interrupts: list, NextCursor: next})
}

// getInterrupt: GET /api/v1/interrupts/{id}.
func (s *Server) getInterrupt(w http.ResponseWriter, r *http.Request, tenant messages.TenantID) {
	in, ok := s.engine.Interrupt(tenant, r.PathValue("id"))
	if !ok {
		writeError(w, errorf(http.StatusNotFound, codeNotFound, "interrupt not found, or already resolved"))
		return
	}
	writeJSON(w, http.StatusOK, in)
}

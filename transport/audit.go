package transport

import (
	"context"
	"net/http"

	"github.com/conclave-ai/conclave/messages"
)

// AuditReader reads a tenant's audit log (audit.Log implements it). Read
// returns up to limit records after index after, in order, and the
// tenant's head; it must be safe for concurrent use.
type AuditReader interface {
	Read(ctx context.Context, tenant messages.TenantID, after uint64, limit int) (messages.AuditPage, error)
}

// listAudit: GET /api/v1/audit?after=N&limit=M, the caller's tenant's
// audit records after index N (docs/api.md, docs/audit.md).
func (s *Server) listAudit(w http.ResponseWriter, r *http.Request, tenant messages.TenantID) {
	if s.cfg.Audit == nil {
		writeError(w, errorf(http.StatusNotFound, codeNotFound, "this server keeps no audit log"))
		return
	}
	q := r.URL.Query()
	after, err := ParseCursor(q.Get("after"))
	if err != nil {
		writeError(w, errorf(http.StatusBadRequest, codeInvalidCursor, "after must be a decimal record index"))
		return
	}
	limit, aerr := pageLimit(q)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	page, err := s.cfg.Audit.Read(r.Context(), tenant, after, limit)
	if err != nil {
		s.cfg.Logger.Error("audit: read", "tenant", tenant, "after", after, "err", err)
		writeError(w, errorf(http.StatusInternalServerError, codeInternal, "the audit log could not be read"))
		return
	}
	writeJSON(w, http.StatusOK, page)
}

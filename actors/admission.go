package actors

import (
	"fmt"
	"time"

	"golang.org/x/time/rate"

	"github.com/conclave-ai/conclave/messages"
)

// admission applies the tenants' ConcurrentRuns and RunsPerSecond quotas
// to run creation. Only the engine actor uses it (no lock).
//
// It keeps a token bucket per tenant that created a run recently: at most
// one per tenant (tenants are the configured tokens), and buckets that
// have refilled are dropped every pruneEvery admissions, so it does not
// grow with time.
type admission struct {
	limiters map[messages.TenantID]*rate.Limiter
	admits   int
}

const pruneEvery = 1024

func newAdmission() *admission {
	return &admission{limiters: map[messages.TenantID]*rate.Limiter{}}
}

// admit lets tenant create a run at now, or refuses it with a *QuotaError:
// the tenant has live runs not ended already (ConcurrentRuns), or
// creates runs too fast (RunsPerSecond, RunBurst).
func (a *admission) admit(tenant messages.TenantID, l Limits, now time.Time, live int) error {
	if l.ConcurrentRuns > 0 && live >= l.ConcurrentRuns {
		return &QuotaError{Code: QuotaTooManyRuns, Tenant: tenant, RetryAfter: time.Second,
			Message: fmt.Sprintf("tenant %s already has %d runs that have not ended (concurrent_runs quota); retry once one ends", tenant, live)}
	}
	if a.admits++; a.admits%pruneEvery == 0 {
		a.prune(now)
	}
	if l.RunsPerSecond <= 0 {
		delete(a.limiters, tenant)
		return nil
	}
	burst := max(l.RunBurst, 1)
	lim := a.limiters[tenant]
	if lim == nil || lim.Limit() != rate.Limit(l.RunsPerSecond) || lim.Burst() != burst {
		lim = rate.NewLimiter(rate.Limit(l.RunsPerSecond), burst) // new or changed quota: a full bucket
		a.limiters[tenant] = lim
	}
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now) // refused: the token goes back
		return &QuotaError{Code: QuotaRateLimited, Tenant: tenant, RetryAfter: d,
			Message: fmt.Sprintf("tenant %s creates runs faster than %g per second (burst %d; runs_per_second quota)", tenant, l.RunsPerSecond, burst)}
	}
	return nil
}

// prune drops the buckets that are full again: they would be rebuilt
// exactly as they are.
func (a *admission) prune(now time.Time) {
	for tenant, lim := range a.limiters {
		if lim.TokensAt(now) >= float64(lim.Burst()) {
			delete(a.limiters, tenant)
		}
	}
}

package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/conclave-ai/conclave/governance"
	"github.com/conclave-ai/conclave/messages"
)

// Errors of the store.
var (
	ErrClosed   = errors.New("audit: log closed")
	ErrReadOnly = errors.New("audit: log opened read-only")
	// ErrCorrupt wraps a stored record or value that fails its check
	// (hash, chain or checksum) when read.
	ErrCorrupt = errors.New("audit: corrupt record")
)

// MaxPage bounds a Read.
const MaxPage = 1000

// Config configures a Log. Key is required unless ReadOnly.
type Config struct {
	// Dir is the store's directory (conclave serve uses DATA/audit). ""
	// keeps the log in memory (pebble's in-memory vfs): it lasts as long
	// as the process, as the rest of conclave serve --memory does.
	Dir string
	// Key signs the records: the server's key.
	Key *governance.PrivateKey
	// ReadOnly opens an existing store for reading and verifying only.
	ReadOnly bool
	Logger   *slog.Logger
	// Now stamps records appended without a time. Default time.Now.
	Now func() time.Time
}

// Log is the audit log. Its methods are safe for concurrent use; appends
// are serialised (one mutex, held across the fsync: decisions are
// human-paced, so one fsync at a time is plenty; see BENCHMARKS.md).
type Log struct {
	db  *pebble.DB
	key *governance.PrivateKey
	log *slog.Logger
	now func() time.Time
	ro  bool

	mu    sync.Mutex // serialises appends; guards heads
	heads map[messages.TenantID]link

	// closeMu is held shared by every use of db and exclusively by Close,
	// so nothing touches a closed store. Lock order: closeMu, then mu.
	closeMu sync.RWMutex
	closed  bool
}

// acquire holds the store open until release; ErrClosed after Close.
func (l *Log) acquire() (release func(), err error) {
	l.closeMu.RLock()
	if l.closed {
		l.closeMu.RUnlock()
		return nil, ErrClosed
	}
	return l.closeMu.RUnlock, nil
}

// Keys of the store. Tenant ids never hold a 0 byte (messages.TenantID).
const (
	prefixRecord  = 'r' // r tenant 0 index(8, big endian) → the record's JSON
	prefixHead    = 'h' // h tenant → sealed {index, hash} of the tenant's last record
	prefixPending = 'p' // p tenant 0 interrupt → sealed pending interrupt (derive.go)
)

func recordKey(t messages.TenantID, index uint64) []byte {
	k := make([]byte, 0, len(t)+10)
	k = append(k, prefixRecord)
	k = append(k, t...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, index)
}

// parseRecordKey is recordKey's inverse.
func parseRecordKey(k []byte) (messages.TenantID, uint64, bool) {
	if len(k) < 10 || k[0] != prefixRecord || k[len(k)-9] != 0 {
		return "", 0, false
	}
	return messages.TenantID(k[1 : len(k)-9]), binary.BigEndian.Uint64(k[len(k)-8:]), true
}

func headKey(t messages.TenantID) []byte { return append([]byte{prefixHead}, t...) }

func pendingKey(t messages.TenantID, interrupt string) []byte {
	k := append([]byte{prefixPending}, t...)
	k = append(k, 0)
	return append(k, interrupt...)
}

// seal is a stored value other than a record: the SHA-256 of the key and
// the body, then the body. A record needs no seal: its own hash, checked
// on every read, covers it.
func sealValue(key, body []byte) []byte {
	h := sha256.New()
	h.Write(key)
	h.Write(body)
	return append(h.Sum(nil), body...)
}

// unseal checks a sealed value and returns its body.
func unseal(key, v []byte) ([]byte, error) {
	if len(v) < sha256.Size {
		return nil, fmt.Errorf("%w: value of %q is %d bytes", ErrCorrupt, key, len(v))
	}
	h := sha256.New()
	h.Write(key)
	h.Write(v[sha256.Size:])
	if !bytes.Equal(h.Sum(nil), v[:sha256.Size]) {
		return nil, fmt.Errorf("%w: checksum of %q", ErrCorrupt, key)
	}
	return v[sha256.Size:], nil
}

// storedHead is the value of a head key.
type storedHead struct {
	Index uint64 `json:"index"`
	Hash  string `json:"hash"`
}

// Open opens (creating it unless cfg.ReadOnly) the log in cfg.Dir.
func Open(cfg Config) (*Log, error) {
	if cfg.Key == nil && !cfg.ReadOnly {
		return nil, errors.New("audit: Config.Key is required to write")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	po := &pebble.Options{
		Logger:             pebbleLogger{cfg.Logger},
		FormatMajorVersion: pebble.FormatTableFormatV6,
		ReadOnly:           cfg.ReadOnly,
		ErrorIfNotExists:   cfg.ReadOnly,
	}
	dir := cfg.Dir
	if dir == "" {
		if cfg.ReadOnly {
			return nil, errors.New("audit: a read-only log needs a directory")
		}
		po.FS, dir = vfs.NewMem(), "audit"
	}
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, fmt.Errorf("audit: open %s: %w", dir, err)
	}
	l := &Log{db: db, key: cfg.Key, log: cfg.Logger, now: cfg.Now, ro: cfg.ReadOnly, heads: map[messages.TenantID]link{}}
	if err := l.loadHeads(); err != nil {
		_ = db.Close()
		return nil, err
	}
	return l, nil
}

// loadHeads reads every tenant's head.
func (l *Log) loadHeads() error {
	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixHead}, UpperBound: []byte{prefixHead + 1}})
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		body, err := unseal(it.Key(), it.Value())
		if err != nil {
			return err
		}
		var h storedHead
		if err := json.Unmarshal(body, &h); err != nil {
			return fmt.Errorf("%w: head of %q: %v", ErrCorrupt, it.Key()[1:], err)
		}
		l.heads[messages.TenantID(it.Key()[1:])] = link{index: h.Index, hash: h.Hash}
	}
	return it.Error()
}

// Close closes the store. Idempotent.
func (l *Log) Close() error {
	l.closeMu.Lock() // waits for every use in progress
	defer l.closeMu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	return l.db.Close()
}

// Shutdown is Close for the engine's shutdown sequence; ctx is not
// needed (Close waits for at most one append).
func (l *Log) Shutdown(context.Context) error { return l.Close() }

// Head returns tenant's last index (0 for none).
func (l *Log) Head(tenant messages.TenantID) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.heads[tenant].index
}

// Append appends records to their tenants' chains (Tenant, Kind and the
// facts set; Index, PrevHash, Hash and Signature are filled in, and Time
// when zero), durably (fsync) before it returns, and returns them sealed.
func (l *Log) Append(ctx context.Context, recs []messages.AuditRecord) ([]messages.AuditRecord, error) {
	release, err := l.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	if l.ro {
		return nil, ErrReadOnly
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.db.NewBatch()
	defer b.Close()
	staged := map[messages.TenantID]link{}
	out := make([]messages.AuditRecord, len(recs))
	for i, r := range recs {
		if err := l.stage(b, staged, &r); err != nil {
			return nil, err
		}
		out[i] = r
	}
	if err := l.commit(b, staged, true); err != nil {
		return nil, err
	}
	return out, nil
}

// stage seals r as the next record of its tenant and adds it to b.
// Must be called with l.mu held.
func (l *Log) stage(b *pebble.Batch, staged map[messages.TenantID]link, r *messages.AuditRecord) error {
	if _, err := messages.NewTenantID(string(r.Tenant)); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	last, ok := staged[r.Tenant]
	if !ok {
		if last, ok = l.heads[r.Tenant]; !ok {
			last = link{hash: GenesisHash}
		}
	}
	r.Index = last.index + 1
	if r.Time.IsZero() {
		r.Time = l.now()
	}
	r.Time = r.Time.UTC().Round(0)
	if r.Actor == nil {
		r.Actor = []string{}
	}
	if err := seal(r, last.hash, l.key); err != nil {
		return err
	}
	v, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	if err := b.Set(recordKey(r.Tenant, r.Index), v, nil); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	staged[r.Tenant] = link{index: r.Index, hash: r.Hash}
	return nil
}

// commit writes the staged heads into b and commits it, with an fsync
// when sync is set or any record is staged; only then are the heads the
// log's. Must be called with l.mu held.
func (l *Log) commit(b *pebble.Batch, staged map[messages.TenantID]link, sync bool) error {
	for t, h := range staged {
		body, err := json.Marshal(storedHead{Index: h.index, Hash: h.hash})
		if err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		k := headKey(t)
		if err := b.Set(k, sealValue(k, body), nil); err != nil {
			return fmt.Errorf("audit: %w", err)
		}
	}
	if b.Empty() {
		return nil
	}
	opts := pebble.NoSync
	if sync || len(staged) > 0 {
		opts = pebble.Sync
	}
	if err := b.Commit(opts); err != nil {
		return fmt.Errorf("audit: commit: %w", err)
	}
	for t, h := range staged {
		l.heads[t] = h
	}
	return nil
}

// Read returns up to limit (1..MaxPage) of tenant's records after index
// after, in order, with the head. Every record read is checked: its hash
// against its bytes, its place against its key, and its prev_hash against
// the record before it (signatures are checked by Verify, not here).
func (l *Log) Read(ctx context.Context, tenant messages.TenantID, after uint64, limit int) (messages.AuditPage, error) {
	page := messages.AuditPage{Records: []messages.AuditRecord{}, NextAfter: after}
	release, err := l.acquire()
	if err != nil {
		return page, err
	}
	defer release()
	if limit < 1 || limit > MaxPage {
		return page, fmt.Errorf("audit: limit %d not in 1..%d", limit, MaxPage)
	}
	page.Head = l.Head(tenant)
	if after >= page.Head {
		return page, nil
	}
	prev := GenesisHash
	if after > 0 {
		r, err := l.get(tenant, after)
		if err != nil {
			return page, err
		}
		prev = r.Hash
	}
	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: recordKey(tenant, after+1), UpperBound: recordKey(tenant, page.Head+1)})
	if err != nil {
		return page, fmt.Errorf("audit: %w", err)
	}
	defer it.Close()
	want := after + 1
	for it.First(); it.Valid() && len(page.Records) < limit; it.Next() {
		if err := ctx.Err(); err != nil {
			return page, err
		}
		r, err := decodeRecord(it.Key(), it.Value())
		if err != nil {
			return page, err
		}
		if r.Index != want || r.PrevHash != prev {
			return page, fmt.Errorf("%w: tenant %s record %d: the chain is broken", ErrCorrupt, tenant, want)
		}
		page.Records = append(page.Records, r)
		prev, want = r.Hash, want+1
	}
	if err := it.Error(); err != nil {
		return page, fmt.Errorf("audit: %w", err)
	}
	if len(page.Records) < limit && want <= page.Head {
		return page, fmt.Errorf("%w: tenant %s record %d: missing", ErrCorrupt, tenant, want)
	}
	if n := len(page.Records); n > 0 {
		page.NextAfter = page.Records[n-1].Index
	}
	return page, nil
}

// get reads one record, checked.
func (l *Log) get(tenant messages.TenantID, index uint64) (messages.AuditRecord, error) {
	k := recordKey(tenant, index)
	v, closer, err := l.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return messages.AuditRecord{}, fmt.Errorf("%w: tenant %s record %d: missing", ErrCorrupt, tenant, index)
	} else if err != nil {
		return messages.AuditRecord{}, fmt.Errorf("audit: %w", err)
	}
	defer closer.Close()
	return decodeRecord(k, v)
}

// decodeRecord decodes a stored record and checks it against its key and
// its hash.
func decodeRecord(k, v []byte) (messages.AuditRecord, error) {
	var r messages.AuditRecord
	tenant, index, ok := parseRecordKey(k)
	if !ok {
		return r, fmt.Errorf("%w: key %q", ErrCorrupt, k)
	}
	if err := json.Unmarshal(v, &r); err != nil {
		return r, fmt.Errorf("%w: tenant %s record %d: %v", ErrCorrupt, tenant, index, err)
	}
	if r.Tenant != tenant || r.Index != index {
		return r, fmt.Errorf("%w: tenant %s record %d: it holds record %d of tenant %s", ErrCorrupt, tenant, index, r.Index, r.Tenant)
	}
	if _, err := checkHash(&r); err != nil {
		return r, fmt.Errorf("%w: tenant %s record %d: %v", ErrCorrupt, tenant, index, err)
	}
	return r, nil
}

// VerifyReport is what VerifyStore checked.
type VerifyReport struct {
	// Records counts each tenant's verified records.
	Records map[messages.TenantID]uint64
}

// VerifyStore verifies every stored record of every tenant against pub,
// and each tenant's chain against its head. It returns the first bad
// record as a *VerifyError.
func (l *Log) VerifyStore(ctx context.Context, pub *governance.PublicKey, opts ...VerifyOption) (VerifyReport, error) {
	rep := VerifyReport{Records: map[messages.TenantID]uint64{}}
	release, err := l.acquire()
	if err != nil {
		return rep, err
	}
	defer release()
	v := NewVerifier(pub, opts...)
	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixRecord}, UpperBound: []byte{prefixRecord + 1}})
	if err != nil {
		return rep, fmt.Errorf("audit: %w", err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		tenant, index, ok := parseRecordKey(it.Key())
		if !ok {
			return rep, fmt.Errorf("%w: key %q", ErrCorrupt, it.Key())
		}
		var r messages.AuditRecord
		if err := json.Unmarshal(it.Value(), &r); err != nil {
			return rep, &VerifyError{Tenant: tenant, Index: index, Reason: "unreadable: " + err.Error()}
		}
		if next := v.Last(tenant) + 1; index == next && (r.Tenant != tenant || r.Index != index) {
			return rep, &VerifyError{Tenant: tenant, Index: index, Reason: fmt.Sprintf("the record stored as %d of %s is record %d of %s: records swapped or moved", index, tenant, r.Index, r.Tenant)}
		}
		r.Tenant = tenant // a record of another tenant was caught above
		if err := v.Add(&r); err != nil {
			return rep, err
		}
		rep.Records[tenant]++
	}
	if err := it.Error(); err != nil {
		return rep, fmt.Errorf("audit: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for t := range rep.Records {
		if _, ok := l.heads[t]; !ok {
			return rep, &VerifyError{Tenant: t, Index: 1, Reason: "the tenant has records but no head"}
		}
	}
	for t, h := range l.heads {
		if err := v.Head(t, h.index, h.hash); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// pebbleLogger adapts slog to pebble.Logger.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug("audit: " + fmt.Sprintf(format, args...))
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error("audit: " + fmt.Sprintf(format, args...))
}

// Fatalf must not return: pebble calls it for broken invariants and a
// failed commit; the panic ends the process as pebble's own logger would.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error("audit: store fatal error", "err", msg)
	panic("audit: " + msg)
}

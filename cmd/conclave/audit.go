package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/conclave-ai/conclave/audit"
	"github.com/conclave-ai/conclave/governance"
	"github.com/conclave-ai/conclave/messages"
)

// auditPageLimit is the page size of `audit export` (the API's maximum).
const auditPageLimit = 200

// newAuditCmd is `conclave audit`: verify and export the audit log
// (docs/audit.md).
func newAuditCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "audit",
		Short: "Verify or export the audit log of decisions (docs/audit.md)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageError(errors.New("a subcommand is required: conclave audit verify|export"))
		},
	}
	root.AddCommand(newAuditVerifyCmd(a), newAuditExportCmd(a))
	return root
}

func newAuditVerifyCmd(a *app) *cobra.Command {
	var data, file, pubPath, govPath string
	cmd := &cobra.Command{
		Use:   "verify (--data DIR | --file EXPORT --server-key PUB) [--governance FILE]",
		Short: "Verify the audit log's hash chains and the server's signatures",
		Long: `verify checks every record of the audit log: each tenant's records are
numbered 1, 2, 3… without a gap, each carries the hash of the one before,
each hashes to its hash (RFC 8785 canonical JSON, SHA-256) and each bears
the server's ML-DSA-65 signature. It exits 0 when everything verifies, and
1 naming the first bad record (tenant and index) otherwise.

--data DIR reads the store of a server's data directory (DIR/audit)
directly, with DIR/server.key.pub unless --server-key names the public key;
the server must not be running. It also checks each tenant's stored head,
so deleting the last records is caught.

--file EXPORT reads what GET /api/v1/audit returned (conclave audit export
writes it): one or more pages, concatenated, each a JSON object
{"records":[…],"next_after":N,"head":N}, from index 1. A file that ends
before the highest head its pages name is truncated.

--governance FILE (the server's --governance file) also checks the
approvers' signatures inside the records: each approver is one of the
record's tenant's, each signature verifies over its statement, and the
statement names the record's interrupt and evidence digest.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case (data == "") == (file == ""):
				return usageError(errors.New("give one of --data DIR and --file EXPORT"))
			case file != "" && pubPath == "":
				return usageError(errors.New("--file needs --server-key PUB, the server's public key"))
			}
			if pubPath == "" {
				pubPath = filepath.Join(data, "server.key.pub")
			}
			pub, err := governance.ReadPublicKey(pubPath)
			if err != nil {
				return failure(err)
			}
			var opts []audit.VerifyOption
			if govPath != "" {
				cfg, err := governance.LoadConfig(govPath)
				if err != nil {
					return usageError(fmt.Errorf("--governance: %w", err))
				}
				opts = append(opts, audit.WithApprovers(cfg))
			}
			if data != "" {
				return verifyStore(cmd.Context(), a, data, pub, opts)
			}
			return verifyExport(a, file, pub, opts)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&data, "data", "", "the server's data `directory` (the server must be stopped)")
	fs.StringVar(&file, "file", "", "an export `file`: pages of GET /api/v1/audit, concatenated")
	fs.StringVar(&pubPath, "server-key", "", "the server's public key `file` (default DIR/server.key.pub with --data)")
	fs.StringVar(&govPath, "governance", "", "the server's governance `file`: also verify the approvers' signatures in the records")
	return cmd
}

// verifyStore verifies DIR/audit.
func verifyStore(ctx context.Context, a *app, data string, pub *governance.PublicKey, opts []audit.VerifyOption) error {
	dir := filepath.Join(data, "audit")
	if _, err := os.Stat(dir); err != nil {
		return failure(fmt.Errorf("no audit log in %s: %w", data, err))
	}
	l, err := audit.Open(audit.Config{Dir: dir, ReadOnly: true})
	if err != nil {
		return failure(fmt.Errorf("%w (is a server running on %s? stop it, or verify an export with --file)", err, data))
	}
	defer l.Close()
	rep, err := l.VerifyStore(ctx, pub, opts...)
	if err != nil {
		return failure(err)
	}
	started, err := l.Started()
	if err != nil {
		return failure(err)
	}
	if !started && len(rep.Records) == 0 {
		// Not "intact: 0 tenants": an empty store is what a deleted
		// write-ahead log leaves, and only the journal knows what it held.
		return failure(fmt.Errorf("the audit log in %s holds no record and no start mark: it was never started, or its files were lost; the next conclave serve derives it from the journal", dir))
	}
	printVerified(a, rep.Records)
	return nil
}

// verifyExport verifies an export file.
func verifyExport(a *app, path string, pub *governance.PublicKey, opts []audit.VerifyOption) error {
	f, err := os.Open(path)
	if err != nil {
		return failure(err)
	}
	defer f.Close()
	v := audit.NewVerifier(pub, opts...)
	counts := map[messages.TenantID]uint64{}
	heads := map[messages.TenantID]uint64{}
	dec := json.NewDecoder(bufio.NewReader(f))
	dec.DisallowUnknownFields()
	for page := 1; ; page++ {
		var p messages.AuditPage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return failure(fmt.Errorf("%s: page %d: %w", path, page, err))
		}
		for i := range p.Records {
			r := &p.Records[i]
			if err := v.Add(r); err != nil {
				return failure(err)
			}
			counts[r.Tenant]++
			heads[r.Tenant] = max(heads[r.Tenant], p.Head)
		}
		if len(p.Records) == 0 && p.Head > 0 {
			return failure(fmt.Errorf("%s: page %d has no records but a head of %d: which tenant's is unknown", path, page, p.Head))
		}
	}
	for t, h := range heads {
		if err := v.Head(t, h, ""); err != nil {
			return failure(err)
		}
	}
	printVerified(a, counts)
	return nil
}

func printVerified(a *app, counts map[messages.TenantID]uint64) {
	tenants := make([]messages.TenantID, 0, len(counts))
	for t := range counts {
		tenants = append(tenants, t)
	}
	slices.Sort(tenants)
	for _, t := range tenants {
		fmt.Fprintf(a.stdout, "tenant %s: %d records verified\n", t, counts[t])
	}
	fmt.Fprintf(a.stdout, "audit log intact: %d tenants\n", len(tenants))
}

func newAuditExportCmd(a *app) *cobra.Command {
	var server, out string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "export --server URL --out FILE",
		Short: "Write the caller's tenant's whole audit log, page by page, to a file",
		Long: `export reads GET /api/v1/audit from index 1 to the head and writes every
page as one JSON line to FILE (what audit verify --file reads). The bearer
token, if the server needs one, is read from CONCLAVE_TOKEN.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			base, err := url.Parse(server)
			if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
				return usageError(fmt.Errorf("invalid --server %q: want http(s)://host:port", server))
			}
			if out == "" {
				return usageError(errors.New("--out is required"))
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return exportAudit(ctx, a, base, out)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&server, "server", "http://127.0.0.1:8080", "the conclave server's base `URL`")
	fs.StringVar(&out, "out", "", "the export `file` to write (refuses to overwrite)")
	fs.DurationVar(&timeout, "timeout", 5*time.Minute, "how long the whole export may take")
	return cmd
}

func exportAudit(ctx context.Context, a *app, base *url.URL, out string) (err error) {
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return failure(err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = failure(cerr)
		}
	}()
	w := bufio.NewWriter(f)
	token := a.env("CONCLAVE_TOKEN")
	var after, n uint64
	for {
		u := base.JoinPath("/api/v1/audit")
		u.RawQuery = url.Values{"after": {strconv.FormatUint(after, 10)}, "limit": {strconv.Itoa(auditPageLimit)}}.Encode()
		raw, err := getAuditPage(ctx, u.String(), token)
		if err != nil {
			return failure(err)
		}
		var p messages.AuditPage
		if err := json.Unmarshal(raw, &p); err != nil {
			return failure(fmt.Errorf("GET %s: %w", u, err))
		}
		if _, err := w.Write(append(raw, '\n')); err != nil {
			return failure(err)
		}
		n += uint64(len(p.Records))
		if len(p.Records) == 0 || p.NextAfter >= p.Head {
			break
		}
		after = p.NextAfter
	}
	if err := w.Flush(); err != nil {
		return failure(err)
	}
	if err := f.Sync(); err != nil {
		return failure(err)
	}
	fmt.Fprintf(a.stdout, "wrote %d audit records to %s\n", n, out)
	return nil
}

// maxAuditPage bounds an answer of GET /api/v1/audit (200 records of a few
// signatures each).
const maxAuditPage = 64 << 20

func getAuditPage(ctx context.Context, u, token string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAuditPage))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		var e messages.ErrorBody
		if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
			return nil, fmt.Errorf("GET %s: %d %s: %s", u, resp.StatusCode, e.Error.Code, e.Error.Message)
		}
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return b, nil
}

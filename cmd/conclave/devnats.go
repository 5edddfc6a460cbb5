package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/spf13/cobra"
)

// devNATSCmd holds the flags of `conclave dev-nats`.
type devNATSCmd struct {
	app  *app
	addr string
	dir  string
}

func newDevNATSCmd(a *app) *cobra.Command {
	c := &devNATSCmd{app: a}
	cmd := &cobra.Command{
		Use:   "dev-nats [--addr 127.0.0.1:4222] [--dir DIR]",
		Short: "Run a NATS server with JetStream on this machine, for trying cluster mode",
		Long: `dev-nats runs the NATS server (nats-server, embedded: the same code, a current
version) with JetStream, storing in --dir, until Ctrl-C. It is for trying
cluster mode on one machine without installing anything: point
` + "`conclave serve --cluster nats://127.0.0.1:4222`" + ` nodes at it (docs/cluster.md). It is one
server, without authentication: not a production deployment.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 0 {
				return usageError(errors.New("dev-nats takes no arguments"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return c.run(cmd.Context()) },
	}
	fs := cmd.Flags()
	fs.StringVar(&c.addr, "addr", "127.0.0.1:4222", "the client `host:port` (port 0 picks a free one; it is printed)")
	fs.StringVar(&c.dir, "dir", filepath.Join(os.TempDir(), "conclave-dev-nats"), "where JetStream stores its streams")
	return cmd
}

func (c *devNATSCmd) run(ctx context.Context) error {
	host, portStr, err := net.SplitHostPort(c.addr)
	port, perr := strconv.Atoi(portStr)
	if err != nil || perr != nil || port < 0 || port > 65535 {
		return usageError(fmt.Errorf("invalid --addr %q: want host:port", c.addr))
	}
	if port == 0 {
		port = -1 // the server's "pick a free port"
	}
	s, err := server.NewServer(&server.Options{ServerName: "conclave-dev", Host: host, Port: port, JetStream: true, StoreDir: c.dir,
		NoLog: true, NoSigs: true})
	if err != nil {
		return failure(fmt.Errorf("dev-nats: %w", err))
	}
	s.Start()
	defer func() {
		s.Shutdown()
		s.WaitForShutdown()
	}()
	if !s.ReadyForConnections(10 * time.Second) {
		return failure(errors.New("dev-nats: the server did not start in 10 s"))
	}
	fmt.Fprintf(c.app.stdout, "nats-server %s with JetStream at %s (storing in %s); Ctrl-C stops it\n", server.VERSION, s.ClientURL(), c.dir)
	<-ctx.Done()
	return nil
}

package fanout

import (
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// BenchmarkLoopbackFloor measures what the kernel alone charges for one
// stream write on loopback and for the client's read of it, with no Go
// runtime in the way: raw non-blocking sockets, one writer thread that
// writes one payload to each connection in turn (as a fan-out server's
// writers do, one write per stream per flush), and one reader thread
// that waits in epoll_wait and reads every ready socket until EAGAIN (as
// the cheapest possible client would). Each thread's CPU time comes from
// getrusage(RUSAGE_THREAD).
//
// It is the floor under `conclave bench fanout --clients 10000`: the
// server's cost per write cannot go below writer µs/write, nor the
// clients' below reader µs/write, so two cores deliver at most
// 2 s / (writer + reader µs) writes a second, whatever the server does
// in user space. See BENCHMARKS.md, "What the kernel charges".
//
//	go test ./internal/fanout -run '^$' -bench LoopbackFloor -benchtime 200000x
func BenchmarkLoopbackFloor(b *testing.B) {
	// 9,000 connections: both ends live in this process, and its file
	// limit here is 20,000 (the fan-out bench has 10,000 per process).
	const conns = 9000
	for _, c := range []struct{ payload, iovecs int }{{150, 1}, {4500, 1}, {4500, 35}} {
		b.Run(fmt.Sprintf("conns=%d/payload=%d/iovecs=%d", conns, c.payload, c.iovecs), func(b *testing.B) {
			p := openPairs(b, conns)
			defer p.close()
			w, r := p.run(b, c.payload, c.iovecs, b.N)
			b.ReportMetric(w.perWrite, "writer-µs/write")
			b.ReportMetric(r.perWrite, "reader-µs/write")
			b.ReportMetric(r.readsPerWake, "reads/epoll_wait")
			b.ReportMetric(2e6/(w.perWrite+r.perWrite), "max-writes/s-on-2-cores")
			b.ReportMetric(0, "ns/op")
		})
	}
}

type loopPairs struct {
	srv, cli []int // srv[i] writes to cli[i]
	lis      int
}

func openPairs(b *testing.B, n int) *loopPairs {
	b.Helper()
	lis, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		b.Fatal(err)
	}
	p := &loopPairs{lis: lis}
	must := func(err error) {
		if err != nil {
			p.close()
			b.Fatal(err)
		}
	}
	must(syscall.Bind(lis, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	must(syscall.Listen(lis, 4096))
	sa, err := syscall.Getsockname(lis)
	must(err)
	for range n {
		c, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
		must(err)
		p.cli = append(p.cli, c)
		must(syscall.Connect(c, sa))
		s, _, err := syscall.Accept(lis)
		must(err)
		p.srv = append(p.srv, s)
		// As Go's net package (and so Conclave) sets them.
		must(syscall.SetsockoptInt(s, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1))
		must(syscall.SetsockoptInt(c, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1))
		must(syscall.SetNonblock(s, true))
		must(syscall.SetNonblock(c, true))
	}
	return p
}

func (p *loopPairs) close() {
	for _, fd := range append(append([]int{p.lis}, p.srv...), p.cli...) {
		_ = syscall.Close(fd)
	}
}

type threadCost struct {
	perWrite     float64 // CPU µs per payload written
	readsPerWake float64
}

// run writes total payloads round-robin while the reader drains them, and
// returns each thread's CPU per payload.
func (p *loopPairs) run(b *testing.B, payload, iovecs, total int) (writer, reader threadCost) {
	ep, err := syscall.EpollCreate1(0)
	if err != nil {
		b.Fatal(err)
	}
	defer syscall.Close(ep)
	for i, fd := range p.cli {
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN | (syscall.EPOLLET & 0xffffffff), Fd: int32(i)}
		if err := syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
			b.Fatal(err)
		}
	}
	want := int64(total) * int64(payload)
	readDone := make(chan threadCost)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		start := threadCPU()
		buf := make([]byte, 256<<10)
		evs := make([]syscall.EpollEvent, 256)
		var got int64
		var wakes, reads int
		deadline := time.Now().Add(2 * time.Minute)
		for got < want && time.Now().Before(deadline) {
			n, err := syscall.EpollWait(ep, evs, 100)
			if err != nil && err != syscall.EINTR {
				break
			}
			wakes++
			for _, ev := range evs[:max(n, 0)] {
				fd := p.cli[ev.Fd]
				for { // edge-triggered: read until EAGAIN
					m, err := syscall.Read(fd, buf)
					if m > 0 {
						got += int64(m)
						reads++
					}
					if err != nil || m < len(buf) {
						break
					}
				}
			}
		}
		cpu := threadCPU() - start
		readDone <- threadCost{perWrite: cpu.Seconds() * 1e6 / float64(total), readsPerWake: float64(reads) / float64(max(wakes, 1))}
	}()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	msg := make([]byte, payload)
	b.ResetTimer()
	start := threadCPU()
	for i := 0; i < total; i++ {
		fd := p.srv[i%len(p.srv)]
		for rest := msg; len(rest) > 0; {
			n, err := writeIovecs(fd, rest, iovecs)
			if n > 0 {
				rest = rest[n:]
			}
			if err == syscall.EAGAIN {
				runtime.Gosched() // the client is behind on this socket
			} else if err != nil {
				b.Fatal(err)
			}
		}
	}
	writer.perWrite = (threadCPU() - start).Seconds() * 1e6 / float64(total)
	reader = <-readDone
	return writer, reader
}

// writeIovecs writes b with one writev of iovecs pieces (one write when 1),
// as a server that hands the kernel one buffer per event does.
func writeIovecs(fd int, b []byte, iovecs int) (int, error) {
	if iovecs <= 1 {
		return syscall.Write(fd, b)
	}
	iov := make([]syscall.Iovec, 0, iovecs)
	step := (len(b) + iovecs - 1) / iovecs
	for off := 0; off < len(b); off += step {
		p := b[off:min(off+step, len(b))]
		v := syscall.Iovec{Base: &p[0]}
		v.SetLen(len(p))
		iov = append(iov, v)
	}
	n, _, errno := syscall.Syscall(syscall.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
	runtime.KeepAlive(b)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// threadCPU is the calling thread's user + system CPU time.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	const rusageThread = 1 // RUSAGE_THREAD, not in package syscall
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

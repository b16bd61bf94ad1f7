// Command loadgen is the load generator of `npm run bench`: it drives a
// discovery server (ours, the original, or a bare echo server) through the
// generated discovery-api client stubs and prints one JSON object with the
// figures on stdout.
//
// Modes (the first argument):
//
//	update  AffiliateUpdate from -callers concurrent callers, each its own cluster and connection
//	hello   Hello from -callers concurrent callers, each its own connection
//	watch   one cluster, -channels × -streams watchers; latency to the last watcher and sustained deliveries/s
//	load    fills -clusters × -affiliates × -endpoints through AffiliateUpdate
//	ready   polls Hello until it succeeds and prints the instant (Unix ns)
//
// Every call carries an `x-real-ip` header taken round-robin from a pool of
// addresses of the IPv6 documentation prefix 2001:db8::/32 (a label only: no
// traffic goes there). The original server trusts X-Real-IP and rate-limits
// each address to 15 calls/s with bursts of 60, so spreading the calls over
// the pool keeps every address far below that and the limiter never delays a
// call. Every loop is bounded in count and in time.
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/siderolabs/discovery-api/api/v1alpha1/server/pb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"
)

// ipPoolSize addresses × 15 calls/s each is far above any rate this machine reaches.
const ipPoolSize = 16384

type options struct {
	addr        string
	callers     int
	warmup      time.Duration
	duration    time.Duration
	dataSize    int
	prefix      string
	serverPID   int
	maxCalls    int
	channels    int
	streams     int
	latencyN    int
	window      int
	clusters    int
	affiliates  int
	endpoints   int
	concurrency int
	timeout     time.Duration
	rate        float64
}

type cpuSample struct {
	wall    time.Time
	self    time.Duration
	server  time.Duration
	machine time.Duration
}

func main() {
	if len(os.Args) < 2 {
		fail(errors.New("usage: loadgen update|hello|watch|load|ready [flags]"))
	}

	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)

	var o options

	fs.StringVar(&o.addr, "addr", "127.0.0.1:3000", "server address")
	fs.IntVar(&o.callers, "callers", 1, "concurrent callers (update, hello)")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "warm-up before measuring")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "measured time")
	fs.IntVar(&o.dataSize, "data-size", 256, "affiliate data bytes")
	fs.StringVar(&o.prefix, "prefix", "bench", "cluster ID prefix (unique per run)")
	fs.IntVar(&o.serverPID, "server-pid", 0, "server process whose CPU time is reported")
	fs.IntVar(&o.maxCalls, "max-calls", 5_000_000, "most calls per caller")
	fs.IntVar(&o.channels, "channels", 10, "watch: connections")
	fs.IntVar(&o.streams, "streams", 100, "watch: streams per connection")
	fs.IntVar(&o.latencyN, "latency-updates", 200, "watch: updates timed one at a time")
	fs.IntVar(&o.window, "window", 16, "watch: updates in flight in the sustained phase (below the buffer of 32)")
	fs.IntVar(&o.clusters, "clusters", 1000, "load: clusters")
	fs.IntVar(&o.affiliates, "affiliates", 5, "load: affiliates per cluster")
	fs.IntVar(&o.endpoints, "endpoints", 2, "load: endpoints per affiliate")
	fs.IntVar(&o.concurrency, "concurrency", 64, "load: concurrent callers")
	fs.DurationVar(&o.timeout, "timeout", 60*time.Second, "upper bound on the whole mode")
	fs.Float64Var(&o.rate, "rate", 0, "update, hello: total calls per second, paced evenly over the callers (0: as fast as they go)")

	if err := fs.Parse(os.Args[2:]); err != nil {
		fail(err)
	}

	var (
		result any
		err    error
	)

	switch mode {
	case "update", "hello":
		result, err = runUnary(mode, o)
	case "watch":
		result, err = runWatch(o)
	case "load":
		result, err = runLoad(o)
	case "ready":
		result, err = runReady(o)
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}

	if err != nil {
		fail(err)
	}

	out, _ := json.Marshal(result)
	fmt.Println(string(out))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "loadgen:", err)
	os.Exit(1)
}

func ipLabel(i int) string {
	i %= ipPoolSize

	return fmt.Sprintf("2001:db8::%x:%x", i>>8, i&0xff)
}

// contexts holds one outgoing context per pool address, derived from parent.
func contexts(parent context.Context) []context.Context {
	ctxs := make([]context.Context, ipPoolSize)
	for i := range ctxs {
		ctxs[i] = metadata.NewOutgoingContext(parent, metadata.Pairs("x-real-ip", ipLabel(i)))
	}

	return ctxs
}

func dial(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 2 * time.Millisecond, Multiplier: 1.2, MaxDelay: 20 * time.Millisecond},
			MinConnectTimeout: time.Second,
		}),
	)
}

func dialAll(addr string, n int) ([]*grpc.ClientConn, error) {
	conns := make([]*grpc.ClientConn, 0, n)
	for range n {
		conn, err := dial(addr)
		if err != nil {
			closeAll(conns)

			return nil, err
		}

		conn.Connect()
		conns = append(conns, conn)
	}

	return conns, nil
}

func closeAll(conns []*grpc.ClientConn) {
	for _, conn := range conns {
		conn.Close() //nolint:errcheck
	}
}

func rusage() time.Duration {
	var ru syscall.Rusage

	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)

	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is the user+system time of a process from /proc/PID/stat (clock ticks of 10 ms).
func procCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}

	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}

	text := string(raw)

	end := strings.LastIndexByte(text, ')')
	if end < 0 {
		return 0
	}

	fields := strings.Fields(text[end+1:])
	if len(fields) < 13 {
		return 0
	}

	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)

	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// machineBusy is the CPU time all processes of the machine spent busy, from /proc/stat
// (user, nice, system, irq, softirq, steal; clock ticks of 10 ms).
func machineBusy() time.Duration {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}

	line, _, _ := strings.Cut(string(raw), "\n")

	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0
	}

	var ticks int64

	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, _ := strconv.ParseInt(fields[i], 10, 64)
		ticks += v
	}

	return time.Duration(ticks) * 10 * time.Millisecond
}

func sample(pid int) cpuSample {
	return cpuSample{wall: time.Now(), self: rusage(), server: procCPU(pid), machine: machineBusy()}
}

type cpuShare struct {
	WallSeconds     float64 `json:"wallSeconds"`
	GeneratorCPU    float64 `json:"generatorCpu"`
	ServerCPU       float64 `json:"serverCpu"`
	GeneratorCPUSec float64 `json:"generatorCpuSeconds"`
	ServerCPUSec    float64 `json:"serverCpuSeconds"`
	// OtherCPU is what the rest of the machine used meanwhile (busy time minus generator and server).
	OtherCPU float64 `json:"otherCpu"`
}

func share(from, to cpuSample) cpuShare {
	wall := to.wall.Sub(from.wall).Seconds()
	self := (to.self - from.self).Seconds()
	server := (to.server - from.server).Seconds()
	other := (to.machine - from.machine).Seconds() - self - server

	return cpuShare{
		OtherCPU:        max(other, 0) / wall,
		WallSeconds:     wall,
		GeneratorCPU:    self / wall,
		ServerCPU:       server / wall,
		GeneratorCPUSec: self,
		ServerCPUSec:    server,
	}
}

type latency struct {
	P50Ms float64 `json:"p50Ms"`
	P99Ms float64 `json:"p99Ms"`
	MaxMs float64 `json:"maxMs"`
	Count int     `json:"count"`
}

func percentiles(samples []time.Duration) latency {
	if len(samples) == 0 {
		return latency{}
	}

	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })

	at := func(q float64) float64 {
		idx := int(q * float64(len(samples)-1))

		return float64(samples[idx]) / 1e6
	}

	return latency{P50Ms: at(0.50), P99Ms: at(0.99), MaxMs: at(1), Count: len(samples)}
}

type unaryResult struct {
	Mode       string   `json:"mode"`
	Rate       float64  `json:"rate,omitempty"`
	Callers    int      `json:"callers"`
	Conns      int      `json:"connections"`
	Calls      int      `json:"calls"`
	PerSecond  float64  `json:"perSecond"`
	Latency    latency  `json:"latency"`
	Errors     int64    `json:"errors"`
	FirstError string   `json:"firstError,omitempty"`
	CPU        cpuShare `json:"cpu"`
}

type errorLog struct {
	count atomic.Int64
	first atomic.Pointer[string]
}

func (e *errorLog) add(err error) {
	e.count.Add(1)

	msg := err.Error()
	e.first.CompareAndSwap(nil, &msg)
}

func (e *errorLog) firstText() string {
	if p := e.first.Load(); p != nil {
		return *p
	}

	return ""
}

// payload returns a distinct data blob of size bytes: 8 bytes of seq, then filler.
func payload(size int, seq uint64, filler []byte) []byte {
	if size < 8 {
		size = 8
	}

	data := make([]byte, size)
	binary.BigEndian.PutUint64(data, seq)
	copy(data[8:], filler)

	return data
}

// runUnary runs AffiliateUpdate or Hello from o.callers callers, each with its own
// connection (and, for updates, its own cluster with five affiliates updated in
// turn, the data changing on every call), for warmup + duration.
func runUnary(mode string, o options) (unaryResult, error) {
	conns, err := dialAll(o.addr, o.callers)
	if err != nil {
		return unaryResult{}, err
	}
	defer closeAll(conns)

	runCtx, cancel := context.WithTimeout(context.Background(), o.warmup+o.duration+o.timeout)
	defer cancel()

	ctxs := contexts(runCtx)

	// Connect and check every caller once before the clock starts.
	for i, conn := range conns {
		client := pb.NewClusterClient(conn)
		if _, err = client.Hello(ctxs[i], &pb.HelloRequest{ClusterId: "probe", ClientVersion: "v1.7.0"}, grpc.WaitForReady(true)); err != nil {
			return unaryResult{}, fmt.Errorf("probe: %w", err)
		}
	}

	var (
		next       atomic.Uint64
		errs       errorLog
		wg         sync.WaitGroup
		start      = time.Now()
		measureAt  = start.Add(o.warmup)
		stopAt     = measureAt.Add(o.duration)
		perCaller  = make([][]time.Duration, o.callers)
		filler     = make([]byte, o.dataSize)
		ttl        = durationpb.New(30 * time.Minute)
		maxSamples = o.maxCalls
	)

	for i := range filler {
		filler[i] = byte(rand.IntN(256))
	}

	for c := range o.callers {
		wg.Add(1)

		go func() {
			defer wg.Done()

			client := pb.NewClusterClient(conns[c])
			cluster := fmt.Sprintf("%s-%d", o.prefix, c)
			affiliates := [5]string{}
			endpoints := [5][][]byte{}

			for a := range affiliates {
				affiliates[a] = fmt.Sprintf("affiliate-%d", a)
				endpoints[a] = [][]byte{
					endpointBlob(fmt.Sprintf("endpoint-%d-%d-a", c, a)),
					endpointBlob(fmt.Sprintf("endpoint-%d-%d-b", c, a)),
				}
			}

			hello := &pb.HelloRequest{ClusterId: cluster, ClientVersion: "v1.7.0"}
			samples := make([]time.Duration, 0, 1<<16)

			var interval time.Duration
			if o.rate > 0 {
				interval = time.Duration(float64(o.callers) / o.rate * float64(time.Second))
			}

			for n := 0; n < o.maxCalls; n++ {
				if interval > 0 {
					due := start.Add(time.Duration(n)*interval + time.Duration(c)*interval/time.Duration(o.callers))
					time.Sleep(time.Until(due))
				}

				callStart := time.Now()
				if !callStart.Before(stopAt) {
					break
				}

				ctx := ctxs[next.Add(1)%ipPoolSize]

				var callErr error

				if mode == "hello" {
					_, callErr = client.Hello(ctx, hello)
				} else {
					seq := uint64(n)
					a := n % len(affiliates)
					data := payload(o.dataSize, seq, filler)
					_, callErr = client.AffiliateUpdate(ctx, &pb.AffiliateUpdateRequest{
						ClusterId:          cluster,
						AffiliateId:        affiliates[a],
						AffiliateData:      data,
						AffiliateEndpoints: endpoints[a],
						Ttl:                ttl,
					})
				}

				elapsed := time.Since(callStart)

				if callErr != nil {
					errs.add(callErr)

					if runCtx.Err() != nil {
						break
					}

					continue
				}

				if !callStart.Before(measureAt) && len(samples) < maxSamples {
					samples = append(samples, elapsed)
				}
			}

			perCaller[c] = samples
		}()
	}

	time.Sleep(time.Until(measureAt))

	from := sample(o.serverPID)

	time.Sleep(time.Until(stopAt))

	to := sample(o.serverPID)

	wg.Wait()

	var all []time.Duration
	for _, s := range perCaller {
		all = append(all, s...)
	}

	calls := len(all)
	cpu := share(from, to)

	return unaryResult{
		Mode:       mode,
		Rate:       o.rate,
		Callers:    o.callers,
		Conns:      len(conns),
		Calls:      calls,
		PerSecond:  float64(calls) / o.duration.Seconds(),
		Latency:    percentiles(all),
		Errors:     errs.count.Load(),
		FirstError: errs.firstText(),
		CPU:        cpu,
	}, nil
}

type watchResult struct {
	Watchers            int      `json:"watchers"`
	Channels            int      `json:"channels"`
	SetupSeconds        float64  `json:"setupSeconds"`
	Latency             latency  `json:"latencyToLastWatcher"`
	LatencyFirst        latency  `json:"latencyToFirstWatcher"`
	LatencyCPU          cpuShare `json:"latencyCpu"`
	SustainedUpdates    int      `json:"sustainedUpdates"`
	DeliveriesPerSecond float64  `json:"deliveriesPerSecond"`
	SustainedLatency    latency  `json:"sustainedLatencyToLastWatcher"`
	Window              int      `json:"window"`
	CPU                 cpuShare `json:"cpu"`
	Errors              int64    `json:"errors"`
	FirstError          string   `json:"firstError,omitempty"`
}

// runWatch opens o.channels × o.streams watchers of one cluster, then times
// o.latencyN updates one at a time (send → arrival at the last watcher), then
// keeps o.window updates in flight for o.duration and counts deliveries.
func runWatch(o options) (watchResult, error) {
	total := o.channels * o.streams
	maxUpdates := o.latencyN + 200_000

	conns, err := dialAll(o.addr, o.channels+1)
	if err != nil {
		return watchResult{}, err
	}
	defer closeAll(conns)

	runCtx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()

	ctxs := contexts(runCtx)
	cluster := o.prefix + "-watch"
	updater := pb.NewClusterClient(conns[o.channels])
	filler := make([]byte, o.dataSize)
	ttl := durationpb.New(30 * time.Minute)
	endpoints := [][]byte{endpointBlob("endpoint-watch-a"), endpointBlob("endpoint-watch-b")}

	var ipNext atomic.Uint64

	update := func(seq uint64) error {
		_, err := updater.AffiliateUpdate(ctxs[ipNext.Add(1)%ipPoolSize], &pb.AffiliateUpdateRequest{
			ClusterId:          cluster,
			AffiliateId:        "watched",
			AffiliateData:      payload(o.dataSize, seq, filler),
			AffiliateEndpoints: endpoints,
			Ttl:                ttl,
		}, grpc.WaitForReady(true))

		return err
	}

	if err = update(0); err != nil {
		return watchResult{}, fmt.Errorf("first update: %w", err)
	}

	var (
		counts    = make([]atomic.Int32, maxUpdates)
		firstAt   = make([]atomic.Int64, maxUpdates)
		lastAt    = make([]atomic.Int64, maxUpdates)
		completed = make(chan uint64, maxUpdates)
		errs      errorLog
		ready     sync.WaitGroup
		done      sync.WaitGroup
		epoch     = time.Now()
	)

	setupStart := time.Now()

	streamCtx, cancelStreams := context.WithCancel(runCtx)
	defer cancelStreams()

	ready.Add(total)

	for i := range total {
		client := pb.NewClusterClient(conns[i/o.streams])
		ctx := metadata.NewOutgoingContext(streamCtx, metadata.Pairs("x-real-ip", ipLabel(int(ipNext.Add(1)))))

		stream, err := client.Watch(ctx, &pb.WatchRequest{ClusterId: cluster}, grpc.WaitForReady(true))
		if err != nil {
			return watchResult{}, fmt.Errorf("watch %d: %w", i, err)
		}

		done.Add(1)

		go func() {
			defer done.Done()

			first := true

			for {
				msg, err := stream.Recv()
				if err != nil {
					if first {
						ready.Done()
					}

					if streamCtx.Err() == nil {
						errs.add(err)
					}

					return
				}

				if first {
					first = false

					ready.Done()

					continue
				}

				if msg.Deleted || len(msg.Affiliates) != 1 || len(msg.Affiliates[0].Data) < 8 {
					continue
				}

				seq := binary.BigEndian.Uint64(msg.Affiliates[0].Data)
				if seq >= uint64(maxUpdates) {
					continue
				}

				now := int64(time.Since(epoch))

				n := counts[seq].Add(1)
				if n == 1 {
					firstAt[seq].Store(now)
				}

				if int(n) == total {
					lastAt[seq].Store(now)
					completed <- seq
				}
			}
		}()
	}

	waitGroup(&ready, o.timeout)

	setup := time.Since(setupStart)

	if errs.count.Load() > 0 {
		return watchResult{}, fmt.Errorf("watch setup: %s", errs.firstText())
	}

	sentAt := make([]int64, maxUpdates)
	seq := uint64(0)

	awaitOne := func() (uint64, bool) {
		select {
		case s := <-completed:
			return s, true
		case <-time.After(10 * time.Second):
			return 0, false
		}
	}

	// Phase 1: one update at a time.
	var toLast, toFirst []time.Duration

	from := sample(o.serverPID)

	for range o.latencyN {
		seq++
		sentAt[seq] = int64(time.Since(epoch))

		if err = update(seq); err != nil {
			return watchResult{}, fmt.Errorf("update: %w", err)
		}

		s, ok := awaitOne()
		if !ok {
			return watchResult{}, fmt.Errorf("update %d did not reach every watcher in 10 s (%d did; errors: %d %s)", seq, counts[seq].Load(), errs.count.Load(), errs.firstText())
		}

		toLast = append(toLast, time.Duration(lastAt[s].Load()-sentAt[s]))
		toFirst = append(toFirst, time.Duration(firstAt[s].Load()-sentAt[s]))
	}

	latencyCPU := share(from, sample(o.serverPID))

	// Phase 2: o.window updates in flight for o.duration. An update is in flight
	// from the moment it is sent until it reached every watcher; o.window
	// senders each send the next update as soon as a slot is free, so the
	// update RPC's own round trip does not limit the rate.
	var (
		sustained []time.Duration
		nextSeq   atomic.Uint64
		sendErr   atomic.Pointer[string]
		senders   sync.WaitGroup
	)

	nextSeq.Store(seq)

	tokens := make(chan struct{}, o.window)
	for range o.window {
		tokens <- struct{}{}
	}

	sentAtNs := make([]atomic.Int64, maxUpdates)
	phaseStart := time.Now()
	phaseEnd := phaseStart.Add(o.duration)
	stop := make(chan struct{})
	from = sample(o.serverPID)

	for range o.window {
		senders.Add(1)

		go func() {
			defer senders.Done()

			for {
				select {
				case <-stop:
					return
				case <-tokens:
				}

				s := nextSeq.Add(1)
				if s >= uint64(maxUpdates) {
					return
				}

				sentAtNs[s].Store(int64(time.Since(epoch)))

				if err := update(s); err != nil {
					msg := err.Error()
					sendErr.CompareAndSwap(nil, &msg)

					return
				}
			}
		}()
	}

	finished := 0

	for time.Now().Before(phaseEnd) && finished < maxUpdates {
		s, ok := awaitOne()
		if !ok {
			close(stop)

			return watchResult{}, fmt.Errorf("sustained phase stalled (errors: %d %s)", errs.count.Load(), errs.firstText())
		}

		if p := sendErr.Load(); p != nil {
			close(stop)

			return watchResult{}, fmt.Errorf("update: %s", *p)
		}

		finished++
		tokens <- struct{}{}

		sustained = append(sustained, time.Duration(lastAt[s].Load()-sentAtNs[s].Load()))
	}

	close(stop)

	elapsed := time.Since(phaseStart)
	cpu := share(from, sample(o.serverPID))

	waitGroup(&senders, 5*time.Second)
	cancelStreams()
	waitGroup(&done, 5*time.Second)

	return watchResult{
		Watchers:            total,
		Channels:            o.channels,
		SetupSeconds:        setup.Seconds(),
		Latency:             percentiles(toLast),
		LatencyFirst:        percentiles(toFirst),
		LatencyCPU:          latencyCPU,
		SustainedUpdates:    finished,
		DeliveriesPerSecond: float64(finished*total) / elapsed.Seconds(),
		SustainedLatency:    percentiles(sustained),
		Window:              o.window,
		CPU:                 cpu,
		Errors:              errs.count.Load(),
		FirstError:          errs.firstText(),
	}, nil
}

func waitGroup(wg *sync.WaitGroup, limit time.Duration) bool {
	ch := make(chan struct{})

	go func() {
		wg.Wait()
		close(ch)
	}()

	select {
	case <-ch:
		return true
	case <-time.After(limit):
		return false
	}
}

type loadResult struct {
	Clusters   int      `json:"clusters"`
	Affiliates int      `json:"affiliates"`
	Endpoints  int      `json:"endpoints"`
	Calls      int64    `json:"calls"`
	Seconds    float64  `json:"seconds"`
	PerSecond  float64  `json:"perSecond"`
	Errors     int64    `json:"errors"`
	FirstError string   `json:"firstError,omitempty"`
	CPU        cpuShare `json:"cpu"`
}

// runLoad stores o.clusters × o.affiliates affiliates, each with o.endpoints
// distinct endpoints and o.dataSize bytes of random data, one AffiliateUpdate each.
func runLoad(o options) (loadResult, error) {
	conns, err := dialAll(o.addr, min(o.concurrency, 16))
	if err != nil {
		return loadResult{}, err
	}
	defer closeAll(conns)

	runCtx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()

	ctxs := contexts(runCtx)
	ttl := durationpb.New(30 * time.Minute)
	totalCalls := int64(o.clusters) * int64(o.affiliates)

	var (
		next  atomic.Int64
		ipSeq atomic.Uint64
		errs  errorLog
		wg    sync.WaitGroup
	)

	from := sample(o.serverPID)

	for w := range o.concurrency {
		wg.Add(1)

		go func() {
			defer wg.Done()

			client := pb.NewClusterClient(conns[w%len(conns)])
			rng := rand.New(rand.NewPCG(uint64(w), 0x9e3779b97f4a7c15))

			for runCtx.Err() == nil {
				i := next.Add(1) - 1
				if i >= totalCalls {
					return
				}

				c, a := i/int64(o.affiliates), i%int64(o.affiliates)
				data := make([]byte, o.dataSize)
				fillRandom(rng, data)

				endpoints := make([][]byte, o.endpoints)
				for e := range endpoints {
					endpoints[e] = make([]byte, 32)
					fillRandom(rng, endpoints[e])
				}

				_, err := client.AffiliateUpdate(ctxs[ipSeq.Add(1)%ipPoolSize], &pb.AffiliateUpdateRequest{
					ClusterId:          fmt.Sprintf("%s-%08d-%s", o.prefix, c, "4f1c2a9be07d3e5f60718293a4b5c"),
					AffiliateId:        fmt.Sprintf("node-%d-%s", a, "0123456789abcdef0123456789abcdef01234"),
					AffiliateData:      data,
					AffiliateEndpoints: endpoints,
					Ttl:                ttl,
				}, grpc.WaitForReady(true))
				if err != nil {
					errs.add(err)
				}
			}
		}()
	}

	wg.Wait()

	cpu := share(from, sample(o.serverPID))
	calls := min(next.Load(), totalCalls)

	return loadResult{
		Clusters:   o.clusters,
		Affiliates: o.affiliates,
		Endpoints:  o.endpoints,
		Calls:      calls,
		Seconds:    cpu.WallSeconds,
		PerSecond:  float64(calls) / cpu.WallSeconds,
		Errors:     errs.count.Load(),
		FirstError: errs.firstText(),
		CPU:        cpu,
	}, nil
}

// endpointBlob is a 32-byte endpoint blob (two AES blocks, as an encrypted endpoint is) starting with label.
func endpointBlob(label string) []byte {
	blob := []byte("................................")
	copy(blob, label)

	return blob
}

func fillRandom(rng *rand.Rand, b []byte) {
	for i := 0; i < len(b); i += 8 {
		v := rng.Uint64()
		for j := 0; j < 8 && i+j < len(b); j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
}

type readyResult struct {
	ReadyUnixNanos int64 `json:"readyUnixNanos"`
	Attempts       int   `json:"attempts"`
}

// runReady calls Hello every 2 ms until one succeeds (bounded by o.timeout).
func runReady(o options) (readyResult, error) {
	deadline := time.Now().Add(o.timeout)
	md := metadata.Pairs("x-real-ip", ipLabel(1))

	for attempt := 1; time.Now().Before(deadline); attempt++ {
		conn, err := dial(o.addr)
		if err != nil {
			return readyResult{}, err
		}

		ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(context.Background(), md), 200*time.Millisecond)
		_, err = pb.NewClusterClient(conn).Hello(ctx, &pb.HelloRequest{ClusterId: "ready", ClientVersion: "v1.7.0"})
		at := time.Now().UnixNano()

		cancel()
		conn.Close() //nolint:errcheck

		if err == nil {
			return readyResult{ReadyUnixNanos: at, Attempts: attempt}, nil
		}

		time.Sleep(2 * time.Millisecond)
	}

	return readyResult{}, errors.New("server not ready in time")
}

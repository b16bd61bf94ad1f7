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
//	soak    -channels × -streams watchers over -clusters clusters and a writer at -rate for -duration;
//	        one JSON line per -report interval, then the result (see runSoak)
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
	serverPIDs  string
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
	writers     int
	report      time.Duration
	drain       time.Duration
}

type cpuSample struct {
	wall    time.Time
	self    time.Duration
	server  time.Duration
	machine time.Duration
}

func main() {
	if len(os.Args) < 2 {
		fail(errors.New("usage: loadgen update|hello|watch|load|ready|soak [flags]"))
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
	fs.StringVar(&o.serverPIDs, "server-pid", "", "server processes whose CPU time is reported, summed (comma-separated PIDs)")
	fs.IntVar(&o.maxCalls, "max-calls", 5_000_000, "most calls per caller")
	fs.IntVar(&o.channels, "channels", 10, "watch, soak: connections")
	fs.IntVar(&o.streams, "streams", 100, "watch, soak: streams per connection")
	fs.IntVar(&o.latencyN, "latency-updates", 200, "watch: updates timed one at a time")
	fs.IntVar(&o.window, "window", 16, "watch: updates in flight in the sustained phase (below the buffer of 32)")
	fs.IntVar(&o.clusters, "clusters", 1000, "load, soak: clusters")
	fs.IntVar(&o.affiliates, "affiliates", 5, "load, soak: affiliates per cluster")
	fs.IntVar(&o.endpoints, "endpoints", 2, "load: endpoints per affiliate")
	fs.IntVar(&o.concurrency, "concurrency", 64, "load: concurrent callers")
	fs.DurationVar(&o.timeout, "timeout", 60*time.Second, "upper bound on the whole mode")
	fs.Float64Var(&o.rate, "rate", 0, "update, hello: total calls per second, paced evenly over the callers (0: as fast as they go); soak: updates per second")
	fs.IntVar(&o.writers, "writers", 8, "soak: concurrent writers (each cluster has one, so its updates are in order)")
	fs.DurationVar(&o.report, "report", 5*time.Second, "soak: interval between progress lines")
	fs.DurationVar(&o.drain, "drain", 30*time.Second, "soak: longest wait for the deliveries in flight once the writer stops")

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
	case "soak":
		result, err = runSoak(o)
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

// dialAll opens n connections, spread round-robin over a comma-separated address list.
func dialAll(addr string, n int) ([]*grpc.ClientConn, error) {
	addrs := strings.Split(addr, ",")
	conns := make([]*grpc.ClientConn, 0, n)

	for i := range n {
		conn, err := dial(addrs[i%len(addrs)])
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

// procCPU is the user+system time of the processes of a comma-separated PID list, summed.
func procCPU(pids string) time.Duration {
	var total time.Duration

	for _, field := range strings.Split(pids, ",") {
		pid, err := strconv.Atoi(strings.TrimSpace(field))
		if err == nil {
			total += processCPU(pid)
		}
	}

	return total
}

// processCPU is the user+system time of a process from /proc/PID/stat (clock ticks of 10 ms).
func processCPU(pid int) time.Duration {
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

func sample(pids string) cpuSample {
	return cpuSample{wall: time.Now(), self: rusage(), server: procCPU(pids), machine: machineBusy()}
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

	from := sample(o.serverPIDs)

	time.Sleep(time.Until(stopAt))

	to := sample(o.serverPIDs)

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

	from := sample(o.serverPIDs)

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

	latencyCPU := share(from, sample(o.serverPIDs))

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
	from = sample(o.serverPIDs)

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
	cpu := share(from, sample(o.serverPIDs))

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

	from := sample(o.serverPIDs)

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

	cpu := share(from, sample(o.serverPIDs))
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
		conn, err := dial(strings.Split(o.addr, ",")[0])
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

// soakUpdateAttempts bounds the tries of one soak update; a retry sends the
// same bytes, which the server takes as no change if the first try landed.
const soakUpdateAttempts = 5

// soakWatchAttempts bounds the Watch calls of one soak watcher (the first and its reconnects).
const soakWatchAttempts = 1000

// soakLatencySamples bounds the delivery latencies held for one progress line.
const soakLatencySamples = 2_000_000

type soakReady struct {
	Type         string  `json:"type"`
	Watchers     int     `json:"watchers"`
	SetupSeconds float64 `json:"setupSeconds"`
}

// soakInterval is the progress line printed every -report; counts without
// "Total" are those of the interval, the others are since the writer started.
type soakInterval struct {
	Type                string  `json:"type"`
	Phase               string  `json:"phase"`
	Seconds             float64 `json:"seconds"`
	Updates             int64   `json:"updates"`
	UpdatesTotal        int64   `json:"updatesTotal"`
	Deliveries          int64   `json:"deliveries"`
	DeliveriesTotal     int64   `json:"deliveriesTotal"`
	ExpectedTotal       int64   `json:"expectedTotal"`
	InFlight            int64   `json:"inFlight"`
	Latency             latency `json:"latency"`
	OpenWatchers        int64   `json:"openWatchers"`
	WatchErrors         int64   `json:"watchErrors"`
	Reconnects          int64   `json:"reconnects"`
	OutOfOrder          int64   `json:"outOfOrder"`
	Gaps                int64   `json:"gaps"`
	Unexpected          int64   `json:"unexpected"`
	WriterErrors        int64   `json:"writerErrors"`
	ServerCPUSeconds    float64 `json:"serverCpuSeconds"`
	GeneratorCPUSeconds float64 `json:"generatorCpuSeconds"`
	// MachineCPUSeconds is the busy time of the whole machine, all processes, since boot.
	MachineCPUSeconds float64 `json:"machineCpuSeconds"`
}

type soakShortfall struct {
	Cluster  string `json:"cluster"`
	Watchers int64  `json:"watchers"`
	Updates  int64  `json:"updates"`
	Expected int64  `json:"expected"`
	Received int64  `json:"received"`
}

type soakResult struct {
	Type             string          `json:"type"`
	Watchers         int             `json:"watchers"`
	Clusters         int             `json:"clusters"`
	Connections      int             `json:"connections"`
	Affiliates       int             `json:"affiliatesPerCluster"`
	SetupSeconds     float64         `json:"setupSeconds"`
	WriterSeconds    float64         `json:"writerSeconds"`
	Updates          int64           `json:"updates"`
	UpdatesPerSecond float64         `json:"updatesPerSecond"`
	Deliveries       int64           `json:"deliveries"`
	Expected         int64           `json:"expected"`
	Missing          int64           `json:"missing"`
	Surplus          int64           `json:"surplus"`
	Shortfalls       []soakShortfall `json:"shortfalls,omitempty"`
	Drained          bool            `json:"drained"`
	DrainSeconds     float64         `json:"drainSeconds"`
	OutOfOrder       int64           `json:"outOfOrder"`
	Gaps             int64           `json:"gaps"`
	Unexpected       int64           `json:"unexpected"`
	WatchErrors      int64           `json:"watchErrors"`
	FirstWatchError  string          `json:"firstWatchError,omitempty"`
	Reconnects       int64           `json:"reconnects"`
	WriterErrors     int64           `json:"writerErrors"`
	WriterFailed     int64           `json:"writerFailed"`
	FirstWriterError string          `json:"firstWriterError,omitempty"`
	MaxLatencyMs     float64         `json:"maxLatencyMs"`
	CPU              cpuShare        `json:"cpu"`
}

// soakState is what the watchers, the writers and the reporter of one soak share.
type soakState struct {
	o          options
	ids        []string
	watchersOf []int64
	acked      []atomic.Int64
	received   []atomic.Int64
	filler     []byte
	ctxs       []context.Context
	ipNext     atomic.Uint64
	epoch      time.Time
	phase      atomic.Pointer[string]
	outMu      sync.Mutex

	updates, deliveries, open, readied       atomic.Int64
	reconnects, outOfOrder, gaps, unexpected atomic.Int64
	writerFailed, maxLatency                 atomic.Int64
	watchErrs, writerErrs                    errorLog
	latMu                                    sync.Mutex
	lat                                      []time.Duration
}

// runSoak is the soak: every cluster gets -affiliates affiliates (sequence 0),
// then -channels × -streams watchers open, watcher i on cluster i mod -clusters
// over connection i / -streams, each with its own x-real-ip label. Once every
// watcher has its snapshot, a writer sends -rate AffiliateUpdates per second
// for -duration, cluster after cluster, each cluster's updates one at a time
// and numbered 1, 2, 3, … in the first 8 bytes of the data (the send time in
// the next 8), so each watcher checks it sees its cluster's numbers in order
// with none missing. A failed watch is counted and reopened. After the writer
// stops, the soak waits up to -drain for the deliveries in flight; every
// update acknowledged must have reached every watcher of its cluster.
func runSoak(o options) (soakResult, error) {
	if o.rate <= 0 || o.clusters <= 0 || o.affiliates <= 0 || o.channels <= 0 || o.streams <= 0 || o.writers <= 0 || o.report <= 0 {
		return soakResult{}, errors.New("soak needs positive -rate, -clusters, -affiliates, -channels, -streams, -writers, -report")
	}

	total := o.channels * o.streams

	conns, err := dialAll(o.addr, o.channels+1)
	if err != nil {
		return soakResult{}, err
	}
	defer closeAll(conns)

	runCtx, cancel := context.WithTimeout(context.Background(), o.duration+o.timeout)
	defer cancel()

	s := &soakState{
		o:          o,
		ids:        make([]string, o.clusters),
		watchersOf: make([]int64, o.clusters),
		acked:      make([]atomic.Int64, o.clusters),
		received:   make([]atomic.Int64, o.clusters),
		filler:     make([]byte, max(o.dataSize, 16)),
		ctxs:       contexts(runCtx),
	}

	for c := range s.ids {
		s.ids[c] = fmt.Sprintf("%s-%04d", o.prefix, c)
	}

	for i := range s.filler {
		s.filler[i] = byte(rand.IntN(256))
	}

	for i := range total {
		s.watchersOf[i%o.clusters]++
	}

	writer := pb.NewClusterClient(conns[o.channels])

	if err = s.populate(runCtx, writer); err != nil {
		return soakResult{}, fmt.Errorf("populate: %w", err)
	}

	setupStart := time.Now()

	streamCtx, cancelStreams := context.WithCancel(runCtx)
	defer cancelStreams()

	var ready, done sync.WaitGroup

	ready.Add(total)

	for i := range total {
		done.Add(1)

		go func() {
			defer done.Done()

			s.watch(streamCtx, pb.NewClusterClient(conns[i/o.streams]), i, &ready)
		}()
	}

	waitGroup(&ready, o.timeout)

	if n := s.readied.Load(); n < int64(total) {
		return soakResult{}, fmt.Errorf("%d of %d watchers got their snapshot in %s (errors: %d, first: %s)",
			n, total, o.timeout, s.watchErrs.count.Load(), s.watchErrs.firstText())
	}

	setup := time.Since(setupStart)
	s.emit(soakReady{Type: "ready", Watchers: total, SetupSeconds: setup.Seconds()})

	writing := "write"
	s.phase.Store(&writing)
	s.epoch = time.Now()

	stopReports := make(chan struct{})
	reportsDone := make(chan struct{})

	go s.reporter(stopReports, reportsDone)

	from := sample(o.serverPIDs)

	s.write(runCtx, writer)

	writerSeconds := time.Since(s.epoch).Seconds()
	cpu := share(from, sample(o.serverPIDs))

	draining := "drain"
	s.phase.Store(&draining)

	drainStart := time.Now()
	for s.shortfall() > 0 && time.Since(drainStart) < o.drain && runCtx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}

	drainSeconds := time.Since(drainStart).Seconds()

	close(stopReports)
	<-reportsDone
	cancelStreams()
	waitGroup(&done, 10*time.Second)

	result := soakResult{
		Type:             "result",
		Watchers:         total,
		Clusters:         o.clusters,
		Connections:      o.channels,
		Affiliates:       o.affiliates,
		SetupSeconds:     setup.Seconds(),
		WriterSeconds:    writerSeconds,
		Updates:          s.updates.Load(),
		UpdatesPerSecond: float64(s.updates.Load()) / writerSeconds,
		Deliveries:       s.deliveries.Load(),
		Expected:         s.expected(),
		DrainSeconds:     drainSeconds,
		OutOfOrder:       s.outOfOrder.Load(),
		Gaps:             s.gaps.Load(),
		Unexpected:       s.unexpected.Load(),
		WatchErrors:      s.watchErrs.count.Load(),
		FirstWatchError:  s.watchErrs.firstText(),
		Reconnects:       s.reconnects.Load(),
		WriterErrors:     s.writerErrs.count.Load(),
		WriterFailed:     s.writerFailed.Load(),
		FirstWriterError: s.writerErrs.firstText(),
		MaxLatencyMs:     float64(s.maxLatency.Load()) / 1e6,
		CPU:              cpu,
	}

	for c := range s.ids {
		updates := s.acked[c].Load()
		expected := updates * s.watchersOf[c]
		received := s.received[c].Load()

		switch {
		case received < expected:
			result.Missing += expected - received

			if len(result.Shortfalls) < 20 {
				result.Shortfalls = append(result.Shortfalls, soakShortfall{
					Cluster: s.ids[c], Watchers: s.watchersOf[c], Updates: updates, Expected: expected, Received: received,
				})
			}
		case received > expected:
			result.Surplus += received - expected
		}
	}

	result.Drained = result.Missing == 0

	return result, nil
}

// emit prints one JSON line.
func (s *soakState) emit(v any) {
	out, _ := json.Marshal(v)

	s.outMu.Lock()
	defer s.outMu.Unlock()

	fmt.Println(string(out))
}

func (s *soakState) expected() int64 {
	var n int64
	for c := range s.ids {
		n += s.acked[c].Load() * s.watchersOf[c]
	}

	return n
}

// shortfall is the deliveries still owed, cluster by cluster.
func (s *soakState) shortfall() int64 {
	var n int64
	for c := range s.ids {
		n += max(0, s.acked[c].Load()*s.watchersOf[c]-s.received[c].Load())
	}

	return n
}

func (s *soakState) affiliate(a int) string {
	return fmt.Sprintf("node-%d", a)
}

// update stores sequence seq as affiliate a of cluster c, retrying the same bytes.
func (s *soakState) update(ctx context.Context, client pb.ClusterClient, c, a int, seq uint64) error {
	data := make([]byte, len(s.filler))
	copy(data, s.filler)
	binary.BigEndian.PutUint64(data, seq)
	binary.BigEndian.PutUint64(data[8:], uint64(time.Now().UnixNano()))

	request := &pb.AffiliateUpdateRequest{
		ClusterId:     s.ids[c],
		AffiliateId:   s.affiliate(a),
		AffiliateData: data,
		AffiliateEndpoints: [][]byte{
			endpointBlob(fmt.Sprintf("soak-%d-%d-a", c, a)),
			endpointBlob(fmt.Sprintf("soak-%d-%d-b", c, a)),
		},
		Ttl: durationpb.New(30 * time.Minute),
	}

	var err error

	for attempt := range soakUpdateAttempts {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return err
			case <-time.After(100 * time.Millisecond):
			}
		}

		callCtx, cancel := context.WithTimeout(s.ctxs[s.ipNext.Add(1)%ipPoolSize], 10*time.Second)
		_, err = client.AffiliateUpdate(callCtx, request, grpc.WaitForReady(true))

		cancel()

		if err == nil {
			return nil
		}

		s.writerErrs.add(err)
	}

	return err
}

// populate stores every affiliate of every cluster with sequence 0.
func (s *soakState) populate(ctx context.Context, client pb.ClusterClient) error {
	var (
		next atomic.Int64
		errs errorLog
		wg   sync.WaitGroup
	)

	count := int64(len(s.ids) * s.o.affiliates)

	for range s.o.writers {
		wg.Add(1)

		go func() {
			defer wg.Done()

			for i := next.Add(1) - 1; i < count && ctx.Err() == nil; i = next.Add(1) - 1 {
				if err := s.update(ctx, client, int(i)/s.o.affiliates, int(i)%s.o.affiliates, 0); err != nil {
					errs.add(err)
				}
			}
		}()
	}

	wg.Wait()

	if errs.count.Load() > 0 {
		return errors.New(errs.firstText())
	}

	return ctx.Err()
}

// write paces the updates at -rate for -duration: update k goes to cluster
// k mod -clusters, through the one writer that owns that cluster.
func (s *soakState) write(ctx context.Context, client pb.ClusterClient) {
	jobs := make([]chan int, s.o.writers)

	var wg sync.WaitGroup

	for w := range jobs {
		jobs[w] = make(chan int, 1024)

		wg.Add(1)

		go func() {
			defer wg.Done()

			seqs := map[int]uint64{}

			for c := range jobs[w] {
				seqs[c]++
				seq := seqs[c]

				if err := s.update(ctx, client, c, int(seq%uint64(s.o.affiliates)), seq); err != nil {
					s.writerFailed.Add(1)

					continue
				}

				s.acked[c].Add(1)
				s.updates.Add(1)
			}
		}()
	}

	stopAt := s.epoch.Add(s.o.duration)
	interval := float64(time.Second) / s.o.rate

dispatch:
	for k := range s.o.maxCalls {
		due := s.epoch.Add(time.Duration(float64(k) * interval))
		if !due.Before(stopAt) {
			break
		}

		if wait := time.Until(due); wait > 0 {
			select {
			case <-ctx.Done():
				break dispatch
			case <-time.After(wait):
			}
		}

		c := k % len(s.ids)

		select {
		case <-ctx.Done():
			break dispatch
		case jobs[c%len(jobs)] <- c:
		}
	}

	for _, ch := range jobs {
		close(ch)
	}

	waitGroup(&wg, 30*time.Second)
}

// watch runs watcher i until ctx ends, reopening its Watch call when it fails.
func (s *soakState) watch(ctx context.Context, client pb.ClusterClient, i int, ready *sync.WaitGroup) {
	c := i % len(s.ids)
	md := metadata.NewOutgoingContext(ctx, metadata.Pairs("x-real-ip", ipLabel(i)))
	signalled := false
	signal := func() {
		if !signalled {
			signalled = true

			s.readied.Add(1)
			ready.Done()
		}
	}

	defer func() {
		if !signalled {
			ready.Done()
		}
	}()

	for attempt := range soakWatchAttempts {
		if attempt > 0 {
			s.reconnects.Add(1)

			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}

		err := s.follow(md, client, c, signal)
		if ctx.Err() != nil {
			return
		}

		s.watchErrs.add(err)
	}
}

// follow runs one Watch call of cluster c until it fails: the snapshot first
// (its highest sequence is where this call's deliveries start), then one
// delta per update, each the next sequence.
func (s *soakState) follow(ctx context.Context, client pb.ClusterClient, c int, ready func()) error {
	stream, err := client.Watch(ctx, &pb.WatchRequest{ClusterId: s.ids[c]}, grpc.WaitForReady(true))
	if err != nil {
		return err
	}

	msg, err := stream.Recv()
	if err != nil {
		return err
	}

	var last uint64

	for _, a := range msg.Affiliates {
		if len(a.Data) >= 8 {
			last = max(last, binary.BigEndian.Uint64(a.Data))
		}
	}

	s.open.Add(1)
	defer s.open.Add(-1)

	ready()

	for {
		msg, err = stream.Recv()
		if err != nil {
			return err
		}

		if msg.Deleted || len(msg.Affiliates) != 1 || len(msg.Affiliates[0].Data) < 16 {
			s.unexpected.Add(1)

			continue
		}

		data := msg.Affiliates[0].Data
		seq := binary.BigEndian.Uint64(data)
		sent := int64(binary.BigEndian.Uint64(data[8:]))

		s.received[c].Add(1)
		s.deliveries.Add(1)
		s.observe(time.Duration(time.Now().UnixNano() - sent))

		switch {
		case seq == last+1:
		case seq > last+1:
			s.gaps.Add(int64(seq - last - 1))
		default:
			s.outOfOrder.Add(1)
		}

		last = max(last, seq)
	}
}

func (s *soakState) observe(d time.Duration) {
	s.latMu.Lock()
	if len(s.lat) < soakLatencySamples {
		s.lat = append(s.lat, d)
	}
	s.latMu.Unlock()

	for {
		top := s.maxLatency.Load()
		if int64(d) <= top || s.maxLatency.CompareAndSwap(top, int64(d)) {
			return
		}
	}
}

// reporter prints a progress line every -report, and a last one when stop closes.
func (s *soakState) reporter(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)

	ticker := time.NewTicker(s.o.report)
	defer ticker.Stop()

	var lastUpdates, lastDeliveries int64

	for {
		final := false

		select {
		case <-ticker.C:
		case <-stop:
			final = true
		}

		deliveries := s.deliveries.Load()
		updates := s.updates.Load()
		expected := s.expected()

		s.latMu.Lock()
		samples := s.lat
		s.lat = make([]time.Duration, 0, cap(samples))
		s.latMu.Unlock()

		s.emit(soakInterval{
			Type:                "interval",
			Phase:               *s.phase.Load(),
			Seconds:             time.Since(s.epoch).Seconds(),
			Updates:             updates - lastUpdates,
			UpdatesTotal:        updates,
			Deliveries:          deliveries - lastDeliveries,
			DeliveriesTotal:     deliveries,
			ExpectedTotal:       expected,
			InFlight:            expected - deliveries,
			Latency:             percentiles(samples),
			OpenWatchers:        s.open.Load(),
			WatchErrors:         s.watchErrs.count.Load(),
			Reconnects:          s.reconnects.Load(),
			OutOfOrder:          s.outOfOrder.Load(),
			Gaps:                s.gaps.Load(),
			Unexpected:          s.unexpected.Load(),
			WriterErrors:        s.writerErrs.count.Load(),
			ServerCPUSeconds:    procCPU(s.o.serverPIDs).Seconds(),
			GeneratorCPUSeconds: rusage().Seconds(),
			MachineCPUSeconds:   machineBusy().Seconds(),
		})

		lastUpdates, lastDeliveries = updates, deliveries

		if final {
			return
		}
	}
}

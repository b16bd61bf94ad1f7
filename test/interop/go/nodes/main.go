// Command nodes runs real discovery-client nodes (the published Go client) for
// the interop tests. It reads one JSON command per line on stdin and writes one
// JSON line per reply or event on stdout, so a TypeScript test can drive
// several nodes in one process.
package main

import (
	"bufio"
	"context"
	"crypto/aes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/siderolabs/discovery-api/api/v1alpha1/client/pb"
	"github.com/siderolabs/discovery-client/pkg/client"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

type endpoint struct {
	IP   string `json:"ip"`
	Port uint32 `json:"port"`
}

type peerEndpoints struct {
	Affiliate string     `json:"affiliate"`
	Endpoints []endpoint `json:"endpoints"`
}

type command struct {
	Cmd       string          `json:"cmd"`
	Node      string          `json:"node"`
	Endpoint  string          `json:"endpoint,omitempty"`
	Cluster   string          `json:"cluster,omitempty"`
	Affiliate string          `json:"affiliate,omitempty"`
	Key       []byte          `json:"key,omitempty"`
	TTL       string          `json:"ttl,omitempty"`
	Hostname  string          `json:"hostname,omitempty"`
	Addresses []string        `json:"addresses,omitempty"`
	Endpoints []endpoint      `json:"endpoints,omitempty"`
	Others    []peerEndpoints `json:"others,omitempty"`
	RealIP    string          `json:"realIp,omitempty"`
	// TLS dials with TLS, trusting the system's roots (and SSL_CERT_FILE), as a Talos node does.
	TLS bool `json:"tls,omitempty"`
}

type discovered struct {
	ID        string     `json:"id"`
	Hostname  string     `json:"hostname"`
	Addresses []string   `json:"addresses"`
	Endpoints []endpoint `json:"endpoints"`
}

type output struct {
	Event      string       `json:"event"`
	Node       string       `json:"node,omitempty"`
	Error      string       `json:"error,omitempty"`
	Affiliates []discovered `json:"affiliates,omitempty"`
	PublicIP   string       `json:"publicIp,omitempty"`
}

type node struct {
	client *client.Client
	cancel context.CancelFunc
	done   chan error
}

var (
	outMu sync.Mutex
	out   = json.NewEncoder(os.Stdout)
)

func emit(o output) {
	outMu.Lock()
	defer outMu.Unlock()

	_ = out.Encode(o)
}

func toEndpoints(list []endpoint) ([]*pb.Endpoint, error) {
	result := make([]*pb.Endpoint, 0, len(list))

	for _, e := range list {
		addr, err := netip.ParseAddr(e.IP)
		if err != nil {
			return nil, err
		}

		ip, _ := addr.MarshalBinary()
		result = append(result, &pb.Endpoint{Ip: ip, Port: e.Port})
	}

	return result, nil
}

func fromEndpoints(list []*pb.Endpoint) []endpoint {
	result := make([]endpoint, 0, len(list))

	for _, e := range list {
		addr, _ := netip.AddrFromSlice(e.Ip)
		result = append(result, endpoint{IP: addr.String(), Port: e.Port})
	}

	sort.Slice(result, func(i, j int) bool { return result[i].Port < result[j].Port })

	return result
}

func snapshot(c *client.Client) []discovered {
	affiliates := c.GetAffiliates()
	result := make([]discovered, 0, len(affiliates))

	for _, a := range affiliates {
		addresses := make([]string, 0, len(a.Affiliate.Addresses))

		for _, raw := range a.Affiliate.Addresses {
			addr, _ := netip.AddrFromSlice(raw)
			addresses = append(addresses, addr.String())
		}

		result = append(result, discovered{
			ID:        a.Affiliate.NodeId,
			Hostname:  a.Affiliate.Hostname,
			Addresses: addresses,
			Endpoints: fromEndpoints(a.Endpoints),
		})
	}

	sort.Slice(result, func(i, j int) bool { return result[i].ID < result[j].ID })

	return result
}

func publicIP(c *client.Client) string {
	addr, ok := netip.AddrFromSlice(c.GetPublicIP())
	if !ok {
		return ""
	}

	return addr.String()
}

// realIPOptions makes every call of a node carry an X-Real-IP header, so that a
// server trusting it counts each simulated node as its own client address.
func realIPOptions(realIP string) []grpc.DialOption {
	if realIP == "" {
		return nil
	}

	withHeader := func(ctx context.Context) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "x-real-ip", realIP)
	}

	return []grpc.DialOption{
		grpc.WithUnaryInterceptor(func(
			ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption,
		) error {
			return invoker(withHeader(ctx), method, req, reply, cc, opts...)
		}),
		grpc.WithStreamInterceptor(func(
			ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption,
		) (grpc.ClientStream, error) {
			return streamer(withHeader(ctx), desc, cc, method, opts...)
		}),
	}
}

func start(cmd command, logger *zap.Logger) (*node, error) {
	block, err := aes.NewCipher(cmd.Key)
	if err != nil {
		return nil, err
	}

	ttl, err := time.ParseDuration(cmd.TTL)
	if err != nil {
		return nil, err
	}

	c, err := client.NewClient(client.Options{
		Cipher:        block,
		Endpoint:      cmd.Endpoint,
		ClusterID:     cmd.Cluster,
		AffiliateID:   cmd.Affiliate,
		ClientVersion: "v1.8.3",
		TTL:           ttl,
		Insecure:      !cmd.TLS,
		DialOptions:   realIPOptions(cmd.RealIP),
	})
	if err != nil {
		return nil, err
	}

	ctx, cancel := context.WithCancel(context.Background())
	notify := make(chan struct{}, 1)
	n := &node{client: c, cancel: cancel, done: make(chan error, 1)}
	name := cmd.Node

	go func() {
		n.done <- c.Run(ctx, logger.With(zap.String("node", name)), notify)
	}()

	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-notify:
				emit(output{Event: "changed", Node: name, Affiliates: snapshot(c), PublicIP: publicIP(c)})
			}
		}
	}()

	return n, nil
}

func handle(nodes map[string]*node, cmd command, logger *zap.Logger) output {
	n := nodes[cmd.Node]
	if cmd.Cmd != "start" && n == nil {
		return output{Event: "error", Node: cmd.Node, Error: "no such node"}
	}

	switch cmd.Cmd {
	case "start":
		started, err := start(cmd, logger)
		if err != nil {
			return output{Event: "error", Node: cmd.Node, Error: err.Error()}
		}

		nodes[cmd.Node] = started

		return output{Event: "started", Node: cmd.Node}
	case "set":
		endpoints, err := toEndpoints(cmd.Endpoints)
		if err != nil {
			return output{Event: "error", Node: cmd.Node, Error: err.Error()}
		}

		addresses := make([][]byte, 0, len(cmd.Addresses))

		for _, a := range cmd.Addresses {
			addr, err := netip.ParseAddr(a)
			if err != nil {
				return output{Event: "error", Node: cmd.Node, Error: err.Error()}
			}

			raw, _ := addr.MarshalBinary()
			addresses = append(addresses, raw)
		}

		others := make([]client.Endpoint, 0, len(cmd.Others))

		for _, o := range cmd.Others {
			list, err := toEndpoints(o.Endpoints)
			if err != nil {
				return output{Event: "error", Node: cmd.Node, Error: err.Error()}
			}

			others = append(others, client.Endpoint{AffiliateID: o.Affiliate, Endpoints: list})
		}

		err = n.client.SetLocalData(&client.Affiliate{
			Affiliate: &pb.Affiliate{NodeId: cmd.Affiliate, Hostname: cmd.Hostname, Addresses: addresses},
			Endpoints: endpoints,
		}, others)
		if err != nil {
			return output{Event: "error", Node: cmd.Node, Error: err.Error()}
		}

		return output{Event: "set", Node: cmd.Node}
	case "delete":
		n.client.DeleteLocalAffiliate()

		return output{Event: "deleted", Node: cmd.Node}
	case "get":
		return output{Event: "state", Node: cmd.Node, Affiliates: snapshot(n.client), PublicIP: publicIP(n.client)}
	case "stop":
		n.cancel()
		err := <-n.done
		delete(nodes, cmd.Node)

		if err != nil {
			return output{Event: "stopped", Node: cmd.Node, Error: err.Error()}
		}

		return output{Event: "stopped", Node: cmd.Node}
	default:
		return output{Event: "error", Node: cmd.Node, Error: fmt.Sprintf("unknown command %q", cmd.Cmd)}
	}
}

func main() {
	logger, err := zap.NewDevelopment(zap.ErrorOutput(zap.CombineWriteSyncers(os.Stderr)))
	if err != nil {
		panic(err)
	}

	logger = logger.WithOptions(zap.IncreaseLevel(zap.WarnLevel))
	nodes := map[string]*node{}
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)

	for scanner.Scan() {
		var cmd command
		if err := json.Unmarshal(scanner.Bytes(), &cmd); err != nil {
			emit(output{Event: "error", Error: err.Error()})

			continue
		}

		emit(handle(nodes, cmd, logger))
	}

	for _, n := range nodes {
		n.cancel()
		<-n.done
	}
}

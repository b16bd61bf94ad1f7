// Command vectors produces and checks the sealing test vectors of the discovery
// client against the published Go client (github.com/siderolabs/discovery-client).
//
// The Go client exports no sealing function: blobs are made inside
// Client.SetLocalData and opened inside Client.Run (parseReply). So this program
// drives the real Client against a tiny in-process gRPC server that implements
// sidero.discovery.server.Cluster (generated code of the discovery-api module):
//
//   - generate: for each fixed key, SetLocalData with fixed plaintexts; the
//     AffiliateUpdate requests the client sends carry the sealed affiliate data
//     and endpoint blobs, which are recorded with the plaintexts (JSON on stdout).
//   - verify FILE: FILE holds blobs sealed by our TypeScript client. The server
//     sends them to the real client as a Watch snapshot; what GetAffiliates
//     returns (re-marshaled) is written to stdout, and the exit status is 1 when
//     it differs from the plaintexts FILE says were sealed.
package main

import (
	"context"
	"crypto/aes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"time"

	"github.com/siderolabs/discovery-api/api/v1alpha1/client/pb"
	serverpb "github.com/siderolabs/discovery-api/api/v1alpha1/server/pb"
	"github.com/siderolabs/discovery-client/pkg/client"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

const (
	clusterID = "vectors"
	selfID    = "go-client"
	peerID    = "peer-1"
	ttl       = time.Hour
	waitLimit = 20 * time.Second
)

// Vectors is the file written by generate (vectors.json).
type Vectors struct {
	Source string      `json:"source"`
	Keys   []KeyVector `json:"keys"`
}

// KeyVector holds every case sealed under one key.
type KeyVector struct {
	Name       string           `json:"name"`
	Key        string           `json:"key"`
	Affiliates []AffiliateCase  `json:"affiliates"`
	Endpoints  []EndpointVector `json:"endpoints"`
}

// AffiliateCase is one affiliate plaintext and its sealed data blob.
type AffiliateCase struct {
	Name      string        `json:"name"`
	Affiliate AffiliateJSON `json:"affiliate"`
	// Plaintext is the protobuf encoding the Go client seals (MarshalVT).
	Plaintext string `json:"plaintext"`
	// Sealed is nonce ‖ AES-GCM ciphertext ‖ tag, as sent in AffiliateUpdate.
	Sealed string `json:"sealed"`
}

// EndpointVector is one endpoint and its (deterministic) sealed blob.
type EndpointVector struct {
	IP     string `json:"ip"`
	Port   uint32 `json:"port"`
	Sealed string `json:"sealed"`
}

// AffiliateJSON is a readable, stable rendering of sidero.discovery.client.Affiliate
// (protojson adds random whitespace on purpose, so it is not used here).
type AffiliateJSON struct {
	NodeID          string            `json:"nodeId"`
	Addresses       []string          `json:"addresses"`
	Hostname        string            `json:"hostname"`
	Nodename        string            `json:"nodename"`
	MachineType     string            `json:"machineType"`
	OperatingSystem string            `json:"operatingSystem"`
	KubeSpan        *KubeSpanJSON     `json:"kubespan,omitempty"`
	ControlPlane    *ControlPlaneJSON `json:"controlPlane,omitempty"`
}

// KubeSpanJSON renders pb.KubeSpan.
type KubeSpanJSON struct {
	PublicKey           string         `json:"publicKey"`
	Address             string         `json:"address"`
	AdditionalAddresses []IPPrefixJSON `json:"additionalAddresses"`
}

// IPPrefixJSON renders pb.IPPrefix.
type IPPrefixJSON struct {
	IP   string `json:"ip"`
	Bits uint32 `json:"bits"`
}

// ControlPlaneJSON renders pb.ControlPlane.
type ControlPlaneJSON struct {
	APIServerPort uint32 `json:"apiServerPort"`
}

// Sealed is the file that verify reads (written by seal.ts).
type Sealed struct {
	Keys []SealedKey `json:"keys"`
}

// SealedKey holds the blobs our client sealed under one key.
type SealedKey struct {
	Name       string            `json:"name"`
	Key        string            `json:"key"`
	Affiliates []SealedAffiliate `json:"affiliates"`
}

// SealedAffiliate is one affiliate sealed by our client, with its endpoints.
type SealedAffiliate struct {
	Name      string           `json:"name"`
	Plaintext string           `json:"plaintext"`
	Nonce     string           `json:"nonce"`
	Sealed    string           `json:"sealed"`
	Endpoints []EndpointVector `json:"endpoints"`
}

// Opened is the file that verify writes (opened-by-go.json).
type Opened struct {
	Source string      `json:"source"`
	Keys   []OpenedKey `json:"keys"`
}

// OpenedKey holds what the Go client read from our blobs under one key.
type OpenedKey struct {
	Name       string            `json:"name"`
	Key        string            `json:"key"`
	Affiliates []OpenedAffiliate `json:"affiliates"`
}

// OpenedAffiliate is one of our blobs and what the Go client made of it.
type OpenedAffiliate struct {
	SealedAffiliate

	// Opened is MarshalVT of the affiliate the Go client decrypted ("" if it was dropped).
	Opened string `json:"opened"`
	// OpenedEndpoints are the endpoints the Go client decrypted, in order.
	OpenedEndpoints []EndpointJSON `json:"openedEndpoints"`
}

// EndpointJSON renders pb.Endpoint.
type EndpointJSON struct {
	IP   string `json:"ip"`
	Port uint32 `json:"port"`
}

func main() {
	var err error

	switch {
	case len(os.Args) == 2 && os.Args[1] == "generate":
		err = generate()
	case len(os.Args) == 3 && os.Args[1] == "verify":
		err = verify(os.Args[2])
	default:
		err = errors.New("usage: vectors generate | vectors verify FILE")
	}

	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}

	return b
}

func repeatByte(b byte, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = b + byte(i)
	}

	return out
}

func keys() []KeyVector {
	return []KeyVector{
		{Name: "aes-128", Key: hex.EncodeToString(repeatByte(0x10, 16))},
		{Name: "aes-192", Key: hex.EncodeToString(repeatByte(0x40, 24))},
		{Name: "aes-256", Key: "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"},
	}
}

func endpointCases() []*pb.Endpoint {
	return []*pb.Endpoint{
		{Ip: []byte{192, 168, 1, 10}, Port: 51820},                         // PROTOCOL.md §5.2 example
		{Ip: []byte{1, 2, 3, 4}, Port: 5678},                               // T58
		{Ip: []byte{10, 0, 0, 1}},                                          // port 0 is left out
		{Ip: []byte{0, 0, 0, 0}, Port: 10},                                 // T60
		{Ip: mustHex("00000000000000000000000000000000"), Port: 100},       // T60, IPv6 ::
		{Ip: mustHex("00000000000000000000000000000001"), Port: 443},       // ::1
		{Ip: mustHex("20010db8000000000000000000000001"), Port: 1<<32 - 1}, // 5-byte port varint
		{},                                     // empty message: one zero size byte, then padding
		{Port: 1},                              // port only
		{Ip: repeatByte(0xa0, 9), Port: 16384}, // size byte + 15 bytes: exactly one block, no padding
		{Ip: repeatByte(0xb0, 23), Port: 1<<32 - 1}, // size byte + 31 bytes: exactly two blocks
	}
}

func affiliateCases() []struct {
	name      string
	affiliate *pb.Affiliate
} {
	hostname := make([]byte, 0, 1990)
	for len(hostname) < 1990 {
		hostname = append(hostname, "node-"...)
	}

	return []struct {
		name      string
		affiliate *pb.Affiliate
	}{
		{name: "empty", affiliate: &pb.Affiliate{}},
		{
			name: "talos-node",
			affiliate: &pb.Affiliate{
				NodeId:          "7x1SuC8Ege5BGXdAfTEff5iQnlWZLfv9h1LGMxA2pYkC",
				Addresses:       [][]byte{{172, 20, 0, 2}, mustHex("fd5c3b2a71e8a40202503efffe4ac63e")},
				Hostname:        "talos-default-controlplane-1",
				Nodename:        "talos-default-controlplane-1",
				MachineType:     "controlplane",
				OperatingSystem: "Talos (v1.8.3)",
				Kubespan: &pb.KubeSpan{
					PublicKey: "PaFmjmvI8oNI2c6A/0kO5VHBHlhBgyP4eUqZm46xhTE=",
					Address:   mustHex("fd5c3b2a71e8a40202503efffe4ac63e"),
					AdditionalAddresses: []*pb.IPPrefix{
						{Ip: []byte{10, 244, 0, 0}, Bits: 24},
						{Ip: mustHex("fd000000000000000000000000000000"), Bits: 64},
					},
				},
				ControlPlane: &pb.ControlPlane{ApiServerPort: 6443},
			},
		},
		{
			name: "present-but-empty-submessages",
			affiliate: &pb.Affiliate{
				NodeId:       "n",
				Hostname:     "nœud-ü-東京",
				Kubespan:     &pb.KubeSpan{},
				ControlPlane: &pb.ControlPlane{},
			},
		},
		{
			name: "large-varints",
			affiliate: &pb.Affiliate{
				MachineType: "worker",
				Kubespan: &pb.KubeSpan{
					AdditionalAddresses: []*pb.IPPrefix{{Bits: 1<<32 - 1}, {}},
				},
				ControlPlane: &pb.ControlPlane{ApiServerPort: 1<<32 - 1},
			},
		},
		{
			name:      "long-hostname",
			affiliate: &pb.Affiliate{NodeId: "big", Hostname: string(hostname)},
		},
	}
}

func affiliateJSON(a *pb.Affiliate) AffiliateJSON {
	out := AffiliateJSON{
		NodeID:          a.NodeId,
		Addresses:       []string{},
		Hostname:        a.Hostname,
		Nodename:        a.Nodename,
		MachineType:     a.MachineType,
		OperatingSystem: a.OperatingSystem,
	}

	for _, address := range a.Addresses {
		out.Addresses = append(out.Addresses, hex.EncodeToString(address))
	}

	if a.Kubespan != nil {
		out.KubeSpan = &KubeSpanJSON{
			PublicKey:           a.Kubespan.PublicKey,
			Address:             hex.EncodeToString(a.Kubespan.Address),
			AdditionalAddresses: []IPPrefixJSON{},
		}

		for _, prefix := range a.Kubespan.AdditionalAddresses {
			out.KubeSpan.AdditionalAddresses = append(out.KubeSpan.AdditionalAddresses,
				IPPrefixJSON{IP: hex.EncodeToString(prefix.Ip), Bits: prefix.Bits})
		}
	}

	if a.ControlPlane != nil {
		out.ControlPlane = &ControlPlaneJSON{APIServerPort: a.ControlPlane.ApiServerPort}
	}

	return out
}

// captureServer is the in-process discovery service: it records updates and
// serves a fixed Watch snapshot.
type captureServer struct {
	serverpb.UnimplementedClusterServer

	updates  chan *serverpb.AffiliateUpdateRequest
	snapshot []*serverpb.Affiliate
}

func (s *captureServer) Hello(context.Context, *serverpb.HelloRequest) (*serverpb.HelloResponse, error) {
	return &serverpb.HelloResponse{}, nil
}

func (s *captureServer) AffiliateUpdate(
	_ context.Context, req *serverpb.AffiliateUpdateRequest,
) (*serverpb.AffiliateUpdateResponse, error) {
	s.updates <- req

	return &serverpb.AffiliateUpdateResponse{}, nil
}

func (s *captureServer) AffiliateDelete(
	context.Context, *serverpb.AffiliateDeleteRequest,
) (*serverpb.AffiliateDeleteResponse, error) {
	return &serverpb.AffiliateDeleteResponse{}, nil
}

func (s *captureServer) Watch(_ *serverpb.WatchRequest, stream serverpb.Cluster_WatchServer) error {
	if err := stream.Send(&serverpb.WatchResponse{Affiliates: s.snapshot}); err != nil {
		return err
	}

	<-stream.Context().Done()

	return nil
}

// session runs the real Go client against a capture server until body returns.
func session(
	key []byte, server *captureServer, body func(c *client.Client, notify <-chan struct{}) error,
) error {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}

	grpcServer := grpc.NewServer()
	serverpb.RegisterClusterServer(grpcServer, server)

	go grpcServer.Serve(listener) //nolint:errcheck
	defer grpcServer.Stop()

	block, err := aes.NewCipher(key)
	if err != nil {
		return err
	}

	c, err := client.NewClient(client.Options{
		Cipher:        block,
		Endpoint:      listener.Addr().String(),
		ClusterID:     clusterID,
		AffiliateID:   selfID,
		ClientVersion: "vectors",
		TTL:           ttl,
		Insecure:      true,
	})
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(context.Background())
	notify := make(chan struct{}, 1)
	done := make(chan error, 1)

	go func() { done <- c.Run(ctx, zap.NewNop(), notify) }()

	bodyErr := body(c, notify)

	cancel()

	return errors.Join(bodyErr, <-done)
}

func waitUpdate(updates <-chan *serverpb.AffiliateUpdateRequest) (*serverpb.AffiliateUpdateRequest, error) {
	select {
	case req := <-updates:
		return req, nil
	case <-time.After(waitLimit):
		return nil, errors.New("timed out waiting for AffiliateUpdate")
	}
}

func hexAll(blobs [][]byte) []string {
	out := make([]string, 0, len(blobs))
	for _, b := range blobs {
		out = append(out, hex.EncodeToString(b))
	}

	return out
}

func generate() error {
	out := Vectors{
		Source: "github.com/siderolabs/discovery-client v0.1.15: Client.SetLocalData sealed these; " +
			"recorded from the AffiliateUpdate requests Client.Run sent to an in-process gRPC server",
	}

	for _, kv := range keys() {
		key := mustHex(kv.Key)
		server := &captureServer{updates: make(chan *serverpb.AffiliateUpdateRequest, 16)}

		err := session(key, server, func(c *client.Client, _ <-chan struct{}) error {
			for index, tc := range affiliateCases() {
				endpoints := endpointCases()
				if err := c.SetLocalData(
					&client.Affiliate{Affiliate: tc.affiliate, Endpoints: endpoints},
					[]client.Endpoint{{AffiliateID: peerID, Endpoints: endpointCases()}},
				); err != nil {
					return err
				}

				own, err := waitUpdate(server.updates)
				if err != nil {
					return err
				}

				peer, err := waitUpdate(server.updates)
				if err != nil {
					return err
				}

				if own.AffiliateId != selfID || peer.AffiliateId != peerID || len(peer.AffiliateData) != 0 {
					return fmt.Errorf("unexpected update order: %q, %q", own.AffiliateId, peer.AffiliateId)
				}

				if !slices.Equal(hexAll(own.AffiliateEndpoints), hexAll(peer.AffiliateEndpoints)) {
					return errors.New("own and peer endpoint blobs differ")
				}

				plaintext, err := tc.affiliate.MarshalVT()
				if err != nil {
					return err
				}

				kv.Affiliates = append(kv.Affiliates, AffiliateCase{
					Name:      tc.name,
					Affiliate: affiliateJSON(tc.affiliate),
					Plaintext: hex.EncodeToString(plaintext),
					Sealed:    hex.EncodeToString(own.AffiliateData),
				})

				if index == 0 {
					for i, endpoint := range endpoints {
						kv.Endpoints = append(kv.Endpoints, EndpointVector{
							IP:     hex.EncodeToString(endpoint.Ip),
							Port:   endpoint.Port,
							Sealed: hex.EncodeToString(own.AffiliateEndpoints[i]),
						})
					}
				} else {
					for i, endpoint := range kv.Endpoints {
						if endpoint.Sealed != hex.EncodeToString(own.AffiliateEndpoints[i]) {
							return errors.New("endpoint sealing is not deterministic")
						}
					}
				}
			}

			return nil
		})
		if err != nil {
			return fmt.Errorf("%s: %w", kv.Name, err)
		}

		out.Keys = append(out.Keys, kv)
	}

	return writeJSON(out)
}

func verify(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}

	var in Sealed
	if err = json.Unmarshal(raw, &in); err != nil {
		return err
	}

	out := Opened{
		Source: "github.com/siderolabs/discovery-client v0.1.15: Client.Run received these blobs in a Watch " +
			"snapshot from an in-process gRPC server; opened and openedEndpoints are what GetAffiliates returned",
	}

	var mismatches []error

	for _, kv := range in.Keys {
		snapshot := make([]*serverpb.Affiliate, 0, len(kv.Affiliates))

		for i, a := range kv.Affiliates {
			endpoints := make([][]byte, 0, len(a.Endpoints))
			for _, e := range a.Endpoints {
				endpoints = append(endpoints, mustHex(e.Sealed))
			}

			snapshot = append(snapshot, &serverpb.Affiliate{
				Id: fmt.Sprintf("ts-%d", i), Data: mustHex(a.Sealed), Endpoints: endpoints,
			})
		}

		server := &captureServer{updates: make(chan *serverpb.AffiliateUpdateRequest, 16), snapshot: snapshot}
		opened := OpenedKey{Name: kv.Name, Key: kv.Key}

		err := session(mustHex(kv.Key), server, func(c *client.Client, notify <-chan struct{}) error {
			select {
			case <-notify:
			case <-time.After(waitLimit):
				return errors.New("timed out waiting for the Watch snapshot")
			}

			found := map[string]*client.Affiliate{}

			for _, a := range c.GetAffiliates() {
				plaintext, err := a.Affiliate.MarshalVT()
				if err != nil {
					return err
				}

				found[hex.EncodeToString(plaintext)] = a
			}

			for _, a := range kv.Affiliates {
				result := OpenedAffiliate{SealedAffiliate: a, OpenedEndpoints: []EndpointJSON{}}

				if match, ok := found[a.Plaintext]; ok {
					result.Opened = a.Plaintext

					for _, e := range match.Endpoints {
						result.OpenedEndpoints = append(result.OpenedEndpoints,
							EndpointJSON{IP: hex.EncodeToString(e.Ip), Port: e.Port})
					}
				}

				if result.Opened != a.Plaintext || !sameEndpoints(result.OpenedEndpoints, a.Endpoints) {
					mismatches = append(mismatches, fmt.Errorf("%s/%s: Go did not open it to the sealed plaintext", kv.Name, a.Name))
				}

				opened.Affiliates = append(opened.Affiliates, result)
			}

			return nil
		})
		if err != nil {
			return fmt.Errorf("%s: %w", kv.Name, err)
		}

		out.Keys = append(out.Keys, opened)
	}

	if err = writeJSON(out); err != nil {
		return err
	}

	return errors.Join(mismatches...)
}

func sameEndpoints(got []EndpointJSON, want []EndpointVector) bool {
	if len(got) != len(want) {
		return false
	}

	for i := range got {
		if got[i].IP != want[i].IP || got[i].Port != want[i].Port {
			return false
		}
	}

	return true
}

func writeJSON(v any) error {
	encoder := json.NewEncoder(os.Stdout)
	encoder.SetIndent("", "  ")

	return encoder.Encode(v)
}

module talos-discovery/test/interop/vectors

go 1.26

require (
	github.com/siderolabs/discovery-api v0.1.8
	github.com/siderolabs/discovery-client v0.1.15
	go.uber.org/zap v1.27.1
	google.golang.org/grpc v1.78.0
)

require (
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/planetscale/vtprotobuf v0.6.1-0.20240319094008-0393e58bdf10 // indirect
	github.com/siderolabs/gen v0.8.6 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	golang.org/x/net v0.47.0 // indirect
	golang.org/x/sys v0.38.0 // indirect
	golang.org/x/text v0.31.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20251029180050-ab9386a59fda // indirect
	google.golang.org/protobuf v1.36.11 // indirect
)

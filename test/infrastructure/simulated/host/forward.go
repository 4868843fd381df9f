/*
Copyright The cabpk-formats Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package host

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// Forward is an address of the lab where a TCP proxy passes connections on
// to one service of this machine that listens on loopback only (a
// management cluster's API server), as a management cluster's endpoint is
// reachable from the machines of the clusters it manages. Nothing else of
// this machine is: the proxy dials its one target.
type Forward struct {
	Addr netip.AddrPort

	target   string
	listener net.Listener
}

// Forward listens on the address reserved for key, at port, and passes
// every connection on to target (host:port on this machine). Close stops it.
func (l *Lab) Forward(key string, port int, target string) (*Forward, error) {
	ln, err := l.listenFreeing(key, port)
	if err != nil {
		return nil, err
	}
	f := &Forward{Addr: netip.AddrPortFrom(ln.addr, uint16(port)), target: target, listener: ln}
	go f.serve()
	return f, nil
}

// Close stops forwarding and frees the address.
func (f *Forward) Close() { _ = f.listener.Close() }

// Listen listens at port on an address of the lab reserved for key, where
// the hosts and their pods reach a service of this machine (the simulated
// cloud's API). Closing the listener frees the address.
func (l *Lab) Listen(key string, port int) (net.Listener, error) {
	ln, err := l.listenFreeing(key, port)
	if err != nil {
		return nil, err
	}
	return ln, nil
}

func (l *Lab) listenFreeing(key string, port int) (*labListener, error) {
	ln, addr, err := l.listen(key, port)
	if err != nil {
		l.ReleaseAddress(key)
		return nil, fmt.Errorf("listening for %s: %w", key, err)
	}
	return &labListener{Listener: ln, lab: l, key: key, addr: addr}, nil
}

// labListener is a listener on an address of the lab that frees the
// address when it closes.
type labListener struct {
	net.Listener
	lab  *Lab
	key  string
	addr netip.Addr
	once sync.Once
}

func (ln *labListener) Close() error {
	ln.once.Do(func() {
		ln.lab.unlisten(ln.Listener, ln.addr)
		ln.lab.ReleaseAddress(ln.key)
	})
	return nil
}

// listen listens at port on the address reserved for key, which it adds
// to this machine's end of the lab network, where the hosts reach it.
func (l *Lab) listen(key string, port int) (net.Listener, netip.Addr, error) {
	addr, err := l.ReserveAddress(key)
	if err != nil {
		return nil, addr, err
	}
	if err := run("ip", "addr", "replace", netip.PrefixFrom(addr, 32).String(), "dev", l.hostIf); err != nil {
		return nil, addr, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(addr.String(), strconv.Itoa(port)))
	return ln, addr, err
}

// unlisten undoes listen but keeps the address reserved.
func (l *Lab) unlisten(ln net.Listener, addr netip.Addr) {
	ln.Close()
	_ = run("ip", "addr", "del", netip.PrefixFrom(addr, 32).String(), "dev", l.hostIf)
}

func (f *Forward) serve() {
	for {
		c, err := f.listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		go func() {
			defer c.Close()
			target, err := net.DialTimeout("tcp", f.target, 2*time.Second)
			if err != nil {
				return // the service is down: the client sees the connection close
			}
			splice(c, target)
		}()
	}
}

// splice copies both ways between a and b until either side ends; it
// closes b, and the caller closes a.
func splice(a, b net.Conn) {
	defer b.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(a, b)
	go pipe(b, a)
	<-done // either side ended: end both
}

// Preloaded into Node (NODE_OPTIONS=--require) when CI runs the MCP conformance suite: every
// TCP server the suite starts listens on 127.0.0.1 only, never on all interfaces.
//
// A listen on a port alone is bound to 127.0.0.1 at once (as Node binds the wildcard address
// at once), because the suite reads server.address() right after listen() returns; a
// listen(port, host) with an explicit host would bind only after an asynchronous lookup.
'use strict';
const net = require('net');
const cluster = require('cluster');
const listen = net.Server.prototype.listen;
const LOCAL = '127.0.0.1';
const wildcard = (h) => h === undefined || h === null || h === '' || h === '0.0.0.0' || h === '::';

net.Server.prototype.listen = function (...args) {
  let port, host, backlog, cb;
  const first = args[0];
  if (typeof args[args.length - 1] === 'function') cb = args.pop();
  if (first !== null && typeof first === 'object' && !Array.isArray(first)) {
    if (first.path !== undefined || first.fd !== undefined || first.handle !== undefined || first._handle !== undefined) {
      return listen.apply(this, cb ? [...args, cb] : args);
    }
    port = first.port; host = first.host; backlog = first.backlog;
  } else {
    [port, host, backlog] = args;
    if (typeof host === 'number') { backlog = host; host = undefined; }
  }
  if (port === undefined || port === null || port === '') port = 0;
  if (typeof port === 'string' && /^\d+$/.test(port)) port = Number(port);
  if (typeof port !== 'number' || !wildcard(host) || cluster.isWorker || typeof this._listen2 !== 'function') {
    if (typeof port === 'number' && !wildcard(host)) return listen.apply(this, cb ? [...args, cb] : args);
    return listen.call(this, { port, host: LOCAL, backlog }, ...(cb ? [cb] : []));
  }
  if (cb) this.once('listening', cb);
  this._listen2(LOCAL, port, 4, backlog || 511, undefined, 0);
  return this;
};

// Preloaded with `node --import` by the tests: a server this process starts without naming a
// host listens on 127.0.0.1 only. server-everything's streamable HTTP transport listens on every
// interface (express `app.listen(PORT)`), and its tools print its environment to any caller.
import net from "node:net";

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const port = args[0];
  const hostless = args.length < 2 || typeof args[1] === "function";
  if ((typeof port === "number" || typeof port === "string") && hostless) {
    return listen.call(this, port, "127.0.0.1", ...args.slice(1));
  }
  return listen.apply(this, args);
};

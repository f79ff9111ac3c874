# bench/nginx_conf.sh — sourced by run.sh and profile.sh: the one nginx
# config both use for the plain-forwarding peer, configured fairly (upstream
# keepalive, keepalive_requests raised, streams raised).
#
#   nginx_conf DIR LISTEN_PORT UPSTREAM MASTER   writes DIR/nginx.conf
#
# UPSTREAM is host:port; MASTER is "on" (run.sh: master + one worker) or
# "off" (profile.sh: one process, so callgrind sees all of it).
nginx_conf() {
  local nd=$1 port=$2 upstream=$3 master=$4
  mkdir -p "$nd/logs" "$nd/tmp"
  cat >"$nd/nginx.conf" <<NGINX
# written by bench/: plain gRPC forwarding to the host
daemon off;
master_process $master;
worker_processes 1;
pid $nd/nginx.pid;
error_log $nd/logs/error.log warn;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path $nd/tmp/body;
  proxy_temp_path $nd/tmp/proxy;
  fastcgi_temp_path $nd/tmp/fastcgi;
  uwsgi_temp_path $nd/tmp/uwsgi;
  scgi_temp_path $nd/tmp/scgi;
  keepalive_requests 1000000;
  keepalive_timeout 300s;
  http2_max_concurrent_streams 1024;
  upstream sandgate_host {
    server $upstream;
    keepalive 1024;
    keepalive_requests 1000000;
    keepalive_timeout 300s;
  }
  server {
    listen 127.0.0.1:$port http2;
    location / {
      grpc_pass grpc://sandgate_host;
    }
  }
}
NGINX
}

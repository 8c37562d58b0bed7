#include "server/submit_follow.h"

#include <memory>
#include <string>

#include "proto/job_file.h"

namespace drover::server {

void AddSubmitAndFollowRoute(net::Server& server, CoreDriver& driver, EventStream& events) {
  server.WebSocketRouteWithAdmission(
      kSubmitAndFollowPath, [&driver, &events](const net::Request& r, net::WsAdmit admit) {
        auto header = r.headers.find("x-drover-job");
        if (header == r.headers.end()) {
          return admit({InvalidArgument("X-Drover-Job: the job spec is missing"), {}, nullptr});
        }
        Result<core::JobSpec> spec = proto::JobSpecFromJson(header->second);
        if (!spec.ok()) return admit({spec.status(), {}, nullptr});
        Result<JobId> id = driver.Submit(std::make_shared<const core::JobSpec>(std::move(*spec)));
        if (!id.ok()) return admit({id.status(), {}, nullptr});
        // The 101 acknowledges the job as a POST's answer would: once it is
        // durable (an acknowledged job survives a crash).
        driver.AfterDurable([admit, job = *id, &driver, &events](Status s) {
          if (!s.ok()) return admit({s.WithContext("job " + std::to_string(job)), {}, nullptr});
          admit({Status::Ok(),
                 {{"X-Drover-Job-Id", std::to_string(job)}},
                 [job, &driver, &events](std::shared_ptr<net::WsSession> session,
                                         const net::Request&) {
                   events.Subscribe(std::move(session), job, driver.Now());
                 }});
        });
      });
}

}  // namespace drover::server

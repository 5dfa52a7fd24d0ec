"""EventBridge and SQS for `make run`: the template's buses and queues on the embedded moto (its server mode serves
both), Lambda's SQS event source mappings emulated as AWS runs them, and a tap on each bus that prints and records
what was published (the local stand-in for a rule's target).

- Queues are made from their template properties (VisibilityTimeout, MessageRetentionPeriod, a RedrivePolicy to
  another of them); moto applies DelaySeconds, visibility timeouts and the redrive (after maxReceiveCount).
- An SQS mapping receives up to BatchSize messages, invokes the function with Lambda's SQS event, deletes what it
  handled (all but its `batchItemFailures`, with ReportBatchItemFailures) and leaves the rest to reappear after the
  visibility timeout. Up to LOCAL_POLLERS batches at once (AWS: up to the mapping's MaximumConcurrency).
- Each bus gets a rule for `source: openalice.scheduler` whose target is a tap queue; the tap prints one line per
  event and appends it to <state>/events.jsonl (moto delivers rule targets itself).

Queues and buses live as long as the process: deliveries in flight when `make run` stops are not kept.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3

from devstack.dynamodb import FAKE_CREDENTIALS
from devstack.lambdas import FunctionError, LocalLambda
from devstack.template import QueueMappingSpec, SamTemplate

log = logging.getLogger("devstack.messaging")

LOCAL_POLLERS = 4  # batches in flight at once per SQS mapping (the deployed one: its MaximumConcurrency)
REGION = FAKE_CREDENTIALS["AWS_DEFAULT_REGION"]
EVENT_SOURCE = "openalice.scheduler"
_QUEUE_ATTRIBUTES = ("VisibilityTimeout", "MessageRetentionPeriod", "DelaySeconds", "ReceiveMessageWaitTimeSeconds")


def _name(logical_id: str) -> str:
    """`WebhookDeliveryQueue` → `openalice-scheduler-webhook-delivery-queue`."""
    return "openalice-scheduler-" + "-".join(word.lower() for word in re.findall(r"[A-Z][a-z0-9]*", logical_id))


def client(endpoint_url: str, service: str) -> Any:
    return boto3.client(  # type: ignore[call-overload]
        service,
        endpoint_url=endpoint_url,
        region_name=REGION,
        aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )


class LocalMessaging:
    """The template's queues and buses on one embedded moto."""

    def __init__(self, endpoint_url: str, template: SamTemplate, state_dir: Path) -> None:
        self._sqs = client(endpoint_url, "sqs")
        self._events = client(endpoint_url, "events")
        self._template = template
        self._state_dir = state_dir
        self._endpoint = endpoint_url
        self.queue_urls: dict[str, str] = {}
        self.queue_arns: dict[str, str] = {}
        self.bus_names: dict[str, str] = {}
        self.taps: dict[str, str] = {}

    def create(self) -> dict[str, str]:
        """Make every queue (those another's redrive points at first) and bus; what `!Ref` gives each, by logical
        id (a queue's URL, a bus's name)."""
        pending = dict(self._template.queues)
        while pending:
            for logical_id, props in list(pending.items()):
                target = (props.get("RedrivePolicy") or {}).get("deadLetterTargetArn")
                if isinstance(target, dict) and target["Fn::GetAtt"][0] not in self.queue_arns:
                    continue
                self._create_queue(logical_id, props)
                del pending[logical_id]
        for logical_id, props in self._template.buses.items():
            name = _name(logical_id)
            if isinstance(props.get("Name"), dict) and "Fn::Sub" in props["Name"]:
                name = str(props["Name"]["Fn::Sub"]).replace("${AWS::StackName}", "openalice-scheduler")
            self._events.create_event_bus(Name=name)
            self.bus_names[logical_id] = name
            self._tap(logical_id, name)
        return {**self.queue_urls, **self.bus_names}

    def _create_queue(self, logical_id: str, props: dict[str, Any]) -> None:
        attributes = {key: str(props[key]) for key in _QUEUE_ATTRIBUTES if key in props}
        redrive = props.get("RedrivePolicy")
        if redrive:
            target = self.queue_arns[redrive["deadLetterTargetArn"]["Fn::GetAtt"][0]]
            attributes["RedrivePolicy"] = json.dumps(
                {"deadLetterTargetArn": target, "maxReceiveCount": str(redrive["maxReceiveCount"])}
            )
        url = self._sqs.create_queue(QueueName=_name(logical_id), Attributes=attributes)["QueueUrl"]
        self.queue_urls[logical_id] = url
        self.queue_arns[logical_id] = self._arn(url)

    def _arn(self, url: str) -> str:
        return str(self._sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"])

    def _tap(self, logical_id: str, bus: str) -> None:
        url = self._sqs.create_queue(QueueName=f"devstack-tap-{bus}")["QueueUrl"]
        rule = f"devstack-tap-{logical_id}"
        self._events.put_rule(Name=rule, EventBusName=bus, EventPattern=json.dumps({"source": [EVENT_SOURCE]}))
        self._events.put_targets(Rule=rule, EventBusName=bus, Targets=[{"Id": "tap", "Arn": self._arn(url)}])
        self.taps[bus] = url

    def workers(self, lambdas: LocalLambda) -> list[tuple[Callable[[threading.Event], None], str]]:
        """What to run until the stack stops: each SQS mapping's pollers, and each bus's tap."""
        found: list[tuple[Callable[[threading.Event], None], str]] = []
        for spec in self._template.queue_mappings:
            mapping = QueueMapping(
                client(self._endpoint, "sqs"), self.queue_urls[spec.queue], self.queue_arns[spec.queue], spec, lambdas
            )
            found += [
                (mapping.run, f"sqs:{spec.function}:{index}")
                for index in range(min(LOCAL_POLLERS, spec.max_concurrency))
            ]
        for bus, url in self.taps.items():
            tap = BusTap(client(self._endpoint, "sqs"), url, self._state_dir / "events.jsonl")
            found.append((tap.run, f"tap:{bus}"))
        return found


class QueueMapping:
    """One SQS event source mapping's poller (several may share one mapping)."""

    def __init__(
        self,
        sqs: Any,
        queue_url: str,
        queue_arn: str,
        spec: QueueMappingSpec,
        lambdas: LocalLambda,
        wait_seconds: int = 1,
    ) -> None:
        self._sqs = sqs
        self._url = queue_url
        self._arn = queue_arn
        self._spec = spec
        self._lambdas = lambdas
        self._wait = wait_seconds
        self.delivered = 0

    def poll_once(self) -> int:
        """Receive one batch, invoke the function with it, delete what it handled; the messages received."""
        messages = self._sqs.receive_message(
            QueueUrl=self._url,
            MaxNumberOfMessages=min(10, self._spec.batch_size),
            WaitTimeSeconds=self._wait,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            return 0
        try:
            result = self._lambdas.invoke(self._spec.function, {"Records": [self._record(m) for m in messages]})
        except FunctionError as error:
            log.error(
                "%s failed a batch of %d; it reappears after the visibility timeout: %s",
                self._spec.function,
                len(messages),
                error,
            )
            return len(messages)
        failed = {str(item.get("itemIdentifier")) for item in (result or {}).get("batchItemFailures") or []}
        if not self._spec.report_item_failures:
            failed = set()
        done = [m for m in messages if m["MessageId"] not in failed]
        if done:
            entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)]
            self._sqs.delete_message_batch(QueueUrl=self._url, Entries=entries)
        self.delivered += len(done)
        return len(messages)

    def _record(self, message: dict[str, Any]) -> dict[str, Any]:
        """A message as Lambda's SQS event carries it."""
        return {
            "messageId": message["MessageId"],
            "receiptHandle": message["ReceiptHandle"],
            "body": message["Body"],
            "attributes": message.get("Attributes", {}),
            "messageAttributes": message.get("MessageAttributes", {}),
            "md5OfBody": message.get("MD5OfBody", ""),
            "eventSource": "aws:sqs",
            "eventSourceARN": self._arn,
            "awsRegion": REGION,
        }

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.poll_once()
            except Exception:
                log.exception("SQS poll failed")
                stop.wait(1.0)


class BusTap:
    """Prints each event a bus received and appends it to a JSON-lines file."""

    def __init__(self, sqs: Any, queue_url: str, path: Path) -> None:
        self._sqs = sqs
        self._url = queue_url
        self._path = path

    def drain_once(self) -> int:
        messages = self._sqs.receive_message(QueueUrl=self._url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
            "Messages", []
        )
        for message in messages:
            event = json.loads(message["Body"])
            detail = event.get("detail") or {}
            data = detail.get("data") or {}
            print(
                f"[devstack] event {event.get('detail-type')} lease {data.get('lease_id')} #{data.get('sequence')}"
                f" by {data.get('actor')}" + (f" ({data['reason']})" if data.get("reason") else ""),
                file=sys.stderr,
                flush=True,
            )
            with self._path.open("a") as handle:
                handle.write(json.dumps(event, separators=(",", ":")) + "\n")
            self._sqs.delete_message(QueueUrl=self._url, ReceiptHandle=message["ReceiptHandle"])
        return len(messages)

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.drain_once()
            except Exception:
                log.exception("bus tap failed")
                stop.wait(1.0)

"""onceflow for Airflow: hook -> operators / sensor -> trigger, the DAG factory and the UI plugin.

Layered like Airflow's own providers: `hooks.OnceflowHook` reads one pipeline's
config and its ledgers (Kafka, checkpoint, sink ledgers, status log);
`operators` submit the Spark apps through the apache-spark provider and turn
audit and recovery results into task outcomes; `sensors.PipelineHealthSensor`
defers to `triggers.PipelineHealthTrigger`, which runs in the triggerer. This
package is installed (not in the DAG bundle) so the triggerer can import it.
"""
